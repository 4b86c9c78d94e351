"""``kebab-eval ref calibrate``: sweep the reference answerer's refusal gate over a golden set and
say which feature and threshold to ship (reference/calibrate.py does the arithmetic)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli.console import out
from kebab_eval_pipeline.foundation.errors import InputError, Offender

#: Thresholds shown in the printed curve (the CSV / JSON hold every 0.01).
_SHOWN_STEP = 0.05


def calibrate(
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config with a reference system (default: the bundled demo)."),
    ] = None,
    golden: Annotated[
        Path | None, typer.Option("--golden", help="Golden set to calibrate on (overrides the config's).")
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=1000, help="Hits retrieved per query.")] = 5,
    min_refusal_correctness: Annotated[
        float,
        typer.Option(
            "--min-refusal-correctness", min=0.0, max=1.0, help="Share of unanswerable queries to refuse."
        ),
    ] = 0.9,
    max_over_refusal: Annotated[
        float,
        typer.Option(
            "--max-over-refusal", min=0.0, max=1.0, help="Target share of answerable queries refused."
        ),
    ] = 0.15,
    csv_out: Annotated[
        Path | None, typer.Option("--out", help="Write the whole curve (every 0.01) to this CSV file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the choice and the curve as JSON.")] = False,
) -> None:
    """Sweep the refusal gate of the config's reference system over its golden set: for each gate
    feature (top_hit, best_of_top3, top3_union) and threshold 0.00–1.00, the over-refusal rate
    (answerable questions refused), under-refusal rate (unanswerable ones answered) and refusal
    correctness it would give. Retrieves once per query in the config's mode. Prints the curve, the
    system's current gate and the recommended one — the lowest over-refusal whose refusal
    correctness reaches --min-refusal-correctness — as the `system:` keys to set.

    The golden set needs answerable and unanswerable (answerable: false) questions. Exit 2 for a
    bad config, a system that is not the reference system, or a golden set without both kinds."""
    import numpy as np

    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.run_overrides import settings_for_run
    from kebab_eval_pipeline.foundation.json_records import json_records
    from kebab_eval_pipeline.reference.calibrate import choose_gate, gate_observations, refusal_curve
    from kebab_eval_pipeline.systems.factory import build_system
    from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem

    settings = settings_for_run(config, {"golden": str(golden.resolve()) if golden else None})
    if settings.system.kind != "reference":
        raise InputError(
            "ref calibrate needs the reference system",
            [Offender(str(config), f"system.kind is {settings.system.kind!r}", field="system.kind")],
        )
    system = build_system(settings)
    assert isinstance(system, ReferenceSystem)
    loaded = pipeline.load_golden_artifact(settings)
    observations = gate_observations(system.index, loaded.queries, system.mode, k, system.fusion)
    curve = refusal_curve(observations)
    golden_name = str(golden or settings.golden or "the demo golden set")
    try:
        choice = choose_gate(curve, min_refusal_correctness, max_over_refusal)
    except ValueError as exc:
        raise InputError("cannot calibrate the refusal gate", [Offender(golden_name, str(exc))]) from None
    # the system's own gate at its exact threshold (it need not lie on the curve's 0.01 grid)
    current = refusal_curve(observations, np.array([system.gate_threshold]))
    current_row = json_records(current[current["feature"] == system.gate_feature])[0]
    if csv_out is not None:
        csv_out.parent.mkdir(parents=True, exist_ok=True)
        curve.to_csv(csv_out, index=False)
    counts = {
        "answerable": int(curve["n_answerable"].iloc[0]),
        "unanswerable": int(curve["n_unanswerable"].iloc[0]),
    }
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "golden": golden_name,
                    "mode": system.mode,
                    "k": k,
                    "queries": counts,
                    "current": current_row,
                    "choice": choice.as_dict(),
                    "curve": json_records(curve),
                },
                ensure_ascii=False,
            )
        )
        return
    _print_curve(curve)
    out.print(  # names and paths as written: not console markup
        f"golden set: {golden_name} ({counts['answerable']} answerable, "
        f"{counts['unanswerable']} unanswerable); mode {system.mode}, top {k} hits",
        markup=False,
    )
    out.print(f"current gate:     {system.gate_feature} >= {system.gate_threshold:g}: " + _rates(current_row))
    out.print(f"recommended gate: {choice.feature} >= {choice.threshold:.2f}: " + _rates(choice.as_dict()))
    out.print(f"  ({choice.reason})")
    out.print(
        f"  to use it: system: {{refusal_feature: {choice.feature}, "
        f"refusal_threshold: {choice.threshold:.2f}}}"
    )
    if csv_out is not None:
        out.print(f"curve written to {csv_out}", markup=False)


def _rates(row: dict) -> str:
    return (
        f"over-refusal {_f(row['over_refusal_rate'])}, under-refusal {_f(row['under_refusal_rate'])}, "
        f"refusal correctness {_f(row['refusal_correctness'])}"
    )


def _f(value) -> str:
    return "null" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _print_curve(curve) -> None:
    from rich.table import Table

    shown = curve[(curve["threshold"] * 100).round().astype(int) % round(_SHOWN_STEP * 100) == 0]
    table = Table("threshold", title="over-refusal / refusal correctness per gate feature")
    features = list(dict.fromkeys(curve["feature"]))
    for feature in features:
        table.add_column(feature, justify="right")
    for threshold, rows in shown.groupby("threshold", sort=True):
        by_feature = {r["feature"]: r for r in rows.to_dict(orient="records")}
        table.add_row(
            f"{threshold:.2f}",
            *(
                f"{_f(by_feature[f]['over_refusal_rate'])} / {_f(by_feature[f]['refusal_correctness'])}"
                for f in features
            ),
        )
    out.print(table)
