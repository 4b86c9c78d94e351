"""What the system under test spent: its token counts and cost per query, priced like the judge's.

A system reports token counts with its answers (``prompt_tokens`` / ``completion_tokens``, or a
``usage`` object: see :func:`~kebab_eval_pipeline.systems.wire.parse_answer`) and may report its
own cost (``cost_usd``). The ``system_costs:`` block of the run config prices the rest::

    system_costs:
      model: gpt-4o-mini            # the model of answers that do not name one
      prices:
        gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.60}

A query's cost is the cost the system reported; else its tokens at its model's price (the answer's
``model``, else ``system_costs.model``); else unknown (null, never 0). The run's cost is then null
when any query with tokens has no cost — a partial sum would look like the whole bill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from kebab_eval_pipeline.foundation.config_model import Price, StrictSettings

if TYPE_CHECKING:  # the run config imports this module: it must not pull in pandas (the CLI's fast exits)
    import pandas as pd


class SystemCostSettings(StrictSettings):
    """The ``system_costs:`` block: the price table of the system under test's models."""

    model: str | None = Field(default=None, min_length=1)  # when an answer does not name its model
    prices: dict[str, Price] = Field(default_factory=dict)  # model name → price


def price_outcomes(outcomes: pd.DataFrame, costs: SystemCostSettings | None) -> pd.DataFrame:
    """``outcomes`` (``OUTCOME_COLUMNS``) with ``cost_usd`` filled where the system reported none.

    Inputs: the ``prompt_tokens``, ``completion_tokens``, ``model`` and ``cost_usd`` columns. A row
    is priced when both token counts are known and its model (the row's, else ``costs.model``) is
    in ``costs.prices``; other rows keep their reported cost or null. Returns a new frame (the same
    rows and columns); without a price table the frame is returned as it is.
    """
    if costs is None or not costs.prices or outcomes.empty:
        return outcomes
    import numpy as np
    import pandas as pd

    model = outcomes["model"].astype("string")
    if costs.model is not None:
        model = model.fillna(costs.model)
    prices = pd.DataFrame(
        {
            "input": [p.input_per_mtok for p in costs.prices.values()],
            "output": [p.output_per_mtok for p in costs.prices.values()],
        },
        index=pd.Index(list(costs.prices), dtype="string"),
    )
    found = prices.reindex(model.to_numpy())  # NaN for a model without a price (or none named)
    prompt = outcomes["prompt_tokens"].to_numpy(dtype=np.float64, na_value=np.nan)
    completion = outcomes["completion_tokens"].to_numpy(dtype=np.float64, na_value=np.nan)
    priced = (prompt * found["input"].to_numpy() + completion * found["output"].to_numpy()) / 1e6
    reported = outcomes["cost_usd"].to_numpy(dtype=np.float64, na_value=np.nan)
    out = outcomes.copy()
    out["cost_usd"] = np.where(np.isnan(reported), priced, reported)
    return out
