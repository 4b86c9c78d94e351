"""``kebab-eval golden validate | convert | schema``: golden sets checked, converted, described."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kebab_eval_pipeline import atomic
from kebab_eval_pipeline.cli.console import err, out
from kebab_eval_pipeline.cli.show import print_probe
from kebab_eval_pipeline.errors import InputError, Offender

FormatOption = Annotated[
    str, typer.Option("--format", help="auto | canonical | kebab | ckv | supports | wfgy (default: sniffed).")
]


def golden_validate(
    files: Annotated[list[Path], typer.Argument(help="Golden files to check.")],
    fmt: FormatOption = "auto",
    config: Annotated[
        Path | None, typer.Option("--config", help="Also check references against this run's system index.")
    ] = None,
) -> None:
    """Validate golden files; every offender is listed at once (exit 2 when any).

    With --config: the reference system's index is checked for every gold reference; a command or
    http system is probed with the first query (its version report, the fields its hits carry,
    whether they name gold documents, the matching warnings a run would give), and what could not
    be checked is listed. A system that cannot be reached (or whose probe fails) exits 1."""
    from kebab_eval_pipeline.artifacts import GoldenArtifact
    from kebab_eval_pipeline.golden.load import load_golden
    from kebab_eval_pipeline.golden.summary import golden_summary, summary_line
    from kebab_eval_pipeline.pipeline import check_golden_against_system
    from kebab_eval_pipeline.settings import load_settings
    from kebab_eval_pipeline.systems.factory import build_system

    loaded = load_golden(files, fmt=fmt)
    artifact = GoldenArtifact.from_loaded(loaded)
    warnings = list(loaded.warnings)
    probe = None
    if config is not None:
        settings = load_settings(config)
        system = build_system(settings)
        warnings += check_golden_against_system(settings, artifact, system)
        if settings.system.kind in ("command", "http"):
            from kebab_eval_pipeline.probe import probe_system

            probe = probe_system(settings, artifact, system)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    summary = golden_summary(artifact.queries)
    out.print(f"ok: {summary_line(summary)} format {loaded.format}", markup=False, highlight=False)
    if probe is not None:
        print_probe(settings.system.kind, probe)
        if probe.error is not None:
            raise typer.Exit(1)


def golden_convert(
    files: Annotated[list[Path], typer.Argument(help="Golden files to convert.")],
    to: Annotated[str, typer.Option("--to", help="Target format (canonical).")] = "canonical",
    fmt: FormatOption = "auto",
    out_path: Annotated[
        Path | None,
        typer.Option("--out", help="File to write; .yaml, .json or .jsonl (default: YAML on stdout)."),
    ] = None,
) -> None:
    """Convert golden files (any readable format) to the canonical format, losslessly."""
    from kebab_eval_pipeline.golden.convert import render_canonical
    from kebab_eval_pipeline.golden.load import load_golden

    if to != "canonical":
        raise InputError(
            "unsupported target format", [Offender("--to", f"{to!r}: only 'canonical' is written")]
        )
    if out_path is not None and out_path.suffix not in (".yaml", ".yml", ".json", ".jsonl"):
        raise InputError("unsupported output file", [Offender(str(out_path), "use .yaml, .json or .jsonl")])
    loaded = load_golden(files, fmt=fmt)
    for w in loaded.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    text = render_canonical(loaded.golden, out_path.suffix if out_path else ".yaml")
    if out_path is None:
        sys.stdout.write(text)
    else:
        atomic.write_text(out_path, text)
        err.print(f"wrote {len(loaded)} queries to {out_path}")


def golden_schema(
    out_path: Annotated[Path | None, typer.Option("--out", help="File to write (default: stdout).")] = None,
) -> None:
    """Print the JSON Schema of the canonical golden format (schema_version 1)."""
    from kebab_eval_pipeline.golden.convert import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if out_path is None:
        sys.stdout.write(text)
    else:
        atomic.write_text(out_path, text)
