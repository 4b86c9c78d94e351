"""Which runs a command reads or writes: the package's own location's, a chain's or a gate's.

A team's ``evaluation_chain("staging", config="eval/staging.yaml")`` stores its runs in the folder
``staging`` under that config's storage; ``evaluation_check(search_index, config="eval/gate.yaml")``
in the folder ``search_index``. Every command that reads stored runs takes ``--chain NAME`` or
``--gate ASSET`` with ``--config`` and reads exactly the folder the chain or check writes
(:func:`kebab_eval_pipeline.foundation.location.run_storage`, the one function both use). Without them a
command reads the artifact base itself (the package's own location, ``kebab-eval run``); when that
holds no runs but folders under it do, a note names them.

No Dagster import: reading commands never start Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.location import CHAIN_NAME, run_storage

if TYPE_CHECKING:
    from kebab_eval_pipeline.orchestration.names import ChainNames
    from kebab_eval_pipeline.store.runs import RunStore

#: ``--config`` of the commands that only read a config's ``storage``.
ConfigOption = Annotated[Path | None, typer.Option("--config", help="Run config YAML (for `storage`).")]
ChainOption = Annotated[
    str | None,
    typer.Option(
        "--chain",
        help="The runs of evaluation_chain(NAME, config=…) in a team's Dagster project: stored in the "
        "folder NAME under --config's storage (pass the chain's own config file).",
        show_default=False,
    ),
]
GateOption = Annotated[
    str | None,
    typer.Option(
        "--gate",
        help="The runs of evaluation_check(ASSET, config=…) on the asset ASSET (its key; a/b for a "
        "key with a prefix): stored in a folder named after it under --config's storage.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Address:
    """Whose runs: the package's own location (neither), a chain's, or a gate's (an asset key's path)."""

    chain: str | None = None
    gate: tuple[str, ...] | None = None

    def storage(self, configured: str | None) -> str:
        """The folder holding these runs, for a config whose ``storage`` is ``configured``."""
        return run_storage(configured, chain=self.chain, gate=self.gate)

    @property
    def label(self) -> str:
        if self.chain is not None:
            return f"chain {self.chain}"
        if self.gate is not None:
            return f"gate on {'/'.join(self.gate)}"
        return "the package's own location"


def address(chain: str | None = None, gate: str | None = None) -> Address:
    """The :class:`Address` of ``--chain`` / ``--gate``; InputError (exit 2) for both at once, a
    chain name that no chain can have, or an empty asset key."""
    offenders = []
    if chain is not None and gate is not None:
        offenders.append(
            Offender("--gate", "give --chain (a chain's runs) or --gate (a check's runs), not both")
        )
    if chain is not None and not CHAIN_NAME.match(chain):
        offenders.append(
            Offender("--chain", f"{chain!r}: a chain's name is a letter, then letters, digits or underscores")
        )
    parts: tuple[str, ...] | None = None
    if gate is not None:
        parts = tuple(gate.split("/"))
        if not all(p.strip() for p in parts):
            offenders.append(
                Offender("--gate", f"{gate!r}: an asset key, e.g. search_index or team/search_index")
            )
    if offenders:
        raise InputError("bad run address", offenders)
    return Address(chain=chain, gate=parts)


def check_chain(chain: str | None, config) -> None:
    """``--chain`` checked without importing Dagster (a writing command refuses bad input before
    it starts Dagster): InputError (exit 2) for a bad name or a chain without its config."""
    if chain is None:
        return
    address(chain)
    if config is None:
        raise InputError(
            "--chain needs the chain's config",
            [Offender("--config", f"give the file evaluation_chain({chain!r}, config=…) names")],
        )


def chain_names(chain: str | None, config) -> ChainNames:
    """The names of the chain a writing command (``run``, ``sweep``, ``rejudge``, ``runs add``)
    works on: ``--chain``'s (which needs the chain's ``--config``), else the package's own
    location's. InputError (exit 2) for a bad name or a missing config (:func:`check_chain`).
    Imports Dagster: call it once the command's input is known to be good."""
    check_chain(chain, config)
    from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames

    return DEFAULT_NAMES if chain is None else ChainNames(chain)


def holding_runs(base: str) -> dict[str, int]:
    """The folders directly under artifact base ``base`` that hold stored runs of their own (a
    chain's or a gate's: ``<folder>/run_metrics/<run id>``), with how many: what a command that found
    no runs at ``base`` suggests instead. Empty when ``base`` cannot be listed."""
    from kebab_eval_pipeline.store.runs import RunStore

    root = RunStore(base).root
    found: dict[str, int] = {}
    try:
        children = sorted(root.iterdir(), key=lambda p: p.name) if root.exists() else []
        for child in children:
            metrics = child / "run_metrics"
            if child.is_dir() and metrics.is_dir():
                count = sum(1 for run in metrics.iterdir() if run.is_dir())
                if count:
                    found[child.name] = count
    except OSError:  # an unreadable folder: no suggestion, the command's own message stands
        return {}
    return found


def has_runs(store: RunStore) -> bool:
    """Whether ``store`` holds at least one stored run (its ``run_metrics`` folder has one)."""
    metrics = store.root / "run_metrics"
    try:
        return metrics.is_dir() and any(run.is_dir() for run in metrics.iterdir())
    except OSError:
        return False


def elsewhere_note(store: RunStore, where: Address, configured: str | None) -> str | None:
    """A note for a store with no runs whose neighbours hold some: at the artifact base, the
    folders of chains and gates under it; at a chain's or a gate's folder, the base and the other
    folders. None when the store holds runs, or nothing nearby does."""
    if has_runs(store):
        return None
    base = run_storage(configured)
    if where.chain is None and where.gate is None:
        folders = holding_runs(base)
        if not folders:
            return None
        shown = ", ".join(f"{name} ({n} run{'s' if n != 1 else ''})" for name, n in folders.items())
        return (
            f"no runs are stored at {base}; folders under it hold the runs of chains or gates: {shown} — "
            "pass --chain NAME (evaluation_chain) or --gate ASSET (evaluation_check) with the same "
            "--config"
        )
    mine = str(store.base).rstrip("/").rsplit("/", 1)[-1]
    others = {k: v for k, v in holding_runs(base).items() if k != mine}
    own = has_runs(type(store)(base))
    if not others and not own:
        return None
    hints = [f"{name} ({n})" for name, n in others.items()]
    if own:
        hints.insert(0, "the base itself (no --chain/--gate)")
    return f"no runs of {where.label} are stored at {store.base}; runs stored under {base}: " + ", ".join(
        hints
    )
