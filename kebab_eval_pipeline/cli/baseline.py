"""``kebab-eval baseline set | show | clear``: the pinned baseline of each golden set."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from kebab_eval_pipeline.cli.address import ChainOption, ConfigOption, GateOption
from kebab_eval_pipeline.cli.console import out
from kebab_eval_pipeline.cli.instance import open_store


def baseline_set(
    run_id: Annotated[str, typer.Argument(help="The stored run to pin.")],
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Pin a stored run as the baseline of its golden set (replacing any earlier pin).

    Used when a run's `baseline` is `auto` (the default) or `pinned`.
    """
    from kebab_eval_pipeline.store.pins import pin_baseline

    pin = pin_baseline(open_store(config, chain, gate), run_id)
    replaced = f" (replaces {pin['replaced']})" if pin["replaced"] not in (None, run_id) else ""
    out.print(
        f"pinned {run_id} as the baseline of golden set {pin['golden']!r} "
        f"at sha256 {pin['golden_sha256'][:12]}…{replaced}",
        markup=False,
        highlight=False,
    )


def baseline_show(
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pins as JSON.")] = False,
) -> None:
    """The pinned baseline of each golden set."""
    from kebab_eval_pipeline.store.pins import read_pins

    store = open_store(config, chain, gate)
    pins = read_pins(store)
    if as_json:
        sys.stdout.write(json.dumps(pins, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return
    if not pins:
        out.print("no pinned baselines")
        return
    table = Table("golden set", "run id", "sha256", "pinned at", "metrics stored")
    for name, pin in sorted(pins.items()):
        stored = "yes" if store.exists("run_metrics", pin["run_id"]) else "no"
        table.add_row(name, pin["run_id"], pin["golden_sha256"][:12], pin["pinned_at"], stored)
    out.print(table)


def baseline_clear(
    golden: Annotated[
        str | None, typer.Option("--golden", help="Golden set name (needed when several are pinned).")
    ] = None,
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Remove a pinned baseline; runs with `baseline: auto` then compare with the previous run."""
    from kebab_eval_pipeline.store.pins import unpin_baseline

    cleared = unpin_baseline(open_store(config, chain, gate), golden)
    if not cleared:
        out.print("no pinned baselines")
    for name in cleared:
        out.print(f"cleared the pinned baseline of golden set {name!r}", markup=False, highlight=False)
