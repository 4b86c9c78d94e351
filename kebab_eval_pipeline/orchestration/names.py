"""The names one evaluation chain's definitions use, so several chains live in one ``Definitions``.

The package's own code location is the chain with no prefix: asset keys ``golden_set``,
``run_metrics``…, resource keys ``eval_settings``…, partitions ``eval_runs``. A chain a team adds
to its own project (:func:`kebab_eval_pipeline.orchestration.factory.evaluation_chain`) has a
prefix, say ``staging``: asset keys ``staging/golden_set``…, resource keys
``staging__eval_settings``…, op/job/sensor/schedule/check-definition names ``staging__…``,
partitions ``staging__eval_runs``. Every builder of a definition takes a :class:`ChainNames` and
asks it for names, so two chains never clash.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import dagster as dg

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import CHAIN_NAME
from kebab_eval_pipeline.orchestration.partitions import eval_runs
from kebab_eval_pipeline.orchestration.registered_runs import SEPARATOR, partitions_name

#: A prefix is used in asset keys, resource keys, definition names and the chain's storage folder.
PREFIX_PATTERN = CHAIN_NAME
DEFAULT_GROUP = "evaluation"


@dataclass(frozen=True)
class ChainNames:
    """Names of one chain's definitions. ``prefix=None`` is the package's own location."""

    prefix: str | None = None

    def __post_init__(self) -> None:
        if self.prefix is not None and not PREFIX_PATTERN.match(self.prefix):
            raise InputError(
                "invalid evaluation chain name",
                [
                    Offender(
                        "name",
                        f"{self.prefix!r}: expected a letter then letters, digits or underscores "
                        "(at most 48), as it becomes part of asset keys and resource keys",
                    )
                ],
            )

    def key(self, name: str) -> dg.AssetKey:
        """The asset key of chain asset ``name`` (``staging/run_metrics``)."""
        return dg.AssetKey([self.prefix, name] if self.prefix else [name])

    def key_prefix(self) -> list[str]:
        return [self.prefix] if self.prefix else []

    def name(self, name: str) -> str:
        """A definition's name (op, job, sensor, schedule, asset check set): ``staging__run_metrics``."""
        return f"{self.prefix}{SEPARATOR}{name}" if self.prefix else name

    def resource(self, name: str) -> str:
        """A resource key (``staging__eval_settings``); resource keys share the definition names' form."""
        return self.name(name)

    @property
    def group(self) -> str:
        """The asset group: one box per chain in the asset graph."""
        return f"{self.prefix}_{DEFAULT_GROUP}" if self.prefix else DEFAULT_GROUP

    @property
    def partitions_name(self) -> str:
        return partitions_name(self.prefix)

    @cached_property
    def partitions(self) -> dg.DynamicPartitionsDefinition:
        """The chain's run partitions (one per run id); the default chain's is ``eval_runs``."""
        if not self.prefix:
            return eval_runs
        return dg.DynamicPartitionsDefinition(name=self.partitions_name)


DEFAULT_NAMES = ChainNames()
