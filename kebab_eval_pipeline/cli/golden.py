"""``kebab-eval golden validate | convert | suggest | schema | record | health | diff | size``: golden
sets checked, converted, described, recorded, compared and sized."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kebab_eval_pipeline.cli.address import ChainOption, GateOption
from kebab_eval_pipeline.cli.console import err, line_asker, out
from kebab_eval_pipeline.cli.show import print_probe
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import ExitCode, InputError, Offender

FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        help="auto | canonical | kebab | ckv | supports | wfgy | beir | trec | ranx (default: sniffed).",
    ),
]
SplitOption = Annotated[
    str, typer.Option("--split", help="A BEIR folder's qrels split: qrels/<split>.tsv (default: test).")
]
QueryFieldOption = Annotated[
    str,
    typer.Option(
        "--query-field", help="The topic field that becomes the query: title (default) | description."
    ),
]


def _options(split: str, query_field: str):
    from kebab_eval_pipeline.golden.datasets import DatasetOptions

    return DatasetOptions(split=split, query_field=query_field)


def golden_validate(
    files: Annotated[list[Path], typer.Argument(help="Golden files to check.")],
    fmt: FormatOption = "auto",
    config: Annotated[
        Path | None, typer.Option("--config", help="Also check references against this run's system index.")
    ] = None,
    split: SplitOption = "test",
    query_field: QueryFieldOption = "title",
) -> None:
    """Validate golden files; every offender is listed at once (exit 2 when any).

    With --config: the reference system's index (or a python system's catalogue()) is checked for
    every gold reference; a command, http or python system is built and probed with the first
    query (its version report, the fields its hits carry, whether they name gold documents, the
    matching warnings a run would give), and what could not be checked is listed. A system that
    cannot be built exits 2; one that cannot be reached (or whose probe fails) exits 1."""
    from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
    from kebab_eval_pipeline.chain.pipeline import check_golden_against_system
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.golden.load import load_golden
    from kebab_eval_pipeline.golden.summary import golden_summary, summary_line
    from kebab_eval_pipeline.systems.factory import build_system
    from kebab_eval_pipeline.systems.settings import kind_of

    loaded = load_golden(files, fmt=fmt, options=_options(split, query_field))
    artifact = GoldenArtifact.from_loaded(loaded)
    warnings = list(loaded.warnings)
    probe = None
    if config is not None:
        settings = load_settings(config)
        system = build_system(settings)
        warnings += check_golden_against_system(settings, artifact, system)
        if kind_of(settings.system.kind).probed:  # a kind whose index cannot be read whole
            from kebab_eval_pipeline.chain.probe import probe_system

            probe = probe_system(settings, artifact, system)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    summary = golden_summary(artifact.queries)
    out.print(f"ok: {summary_line(summary)} format {loaded.format}", markup=False, highlight=False)
    if probe is not None:
        print_probe(settings.system.kind, probe)
        if probe.error is not None:
            raise typer.Exit(ExitCode.FAILED)


def golden_convert(
    files: Annotated[list[Path], typer.Argument(help="Golden files to convert.")],
    to: Annotated[str, typer.Option("--to", help="Target format (canonical).")] = "canonical",
    fmt: FormatOption = "auto",
    out_path: Annotated[
        Path | None,
        typer.Option("--out", help="File to write; .yaml, .json or .jsonl (default: YAML on stdout)."),
    ] = None,
    accept: Annotated[
        list[Path] | None,
        typer.Option(
            "--accept",
            help="A reviewed patch of `golden suggest` (repeatable): its supports are added to the "
            "golden queries of the same ids.",
        ),
    ] = None,
    split: SplitOption = "test",
    query_field: QueryFieldOption = "title",
) -> None:
    """Convert golden files (any readable format) to the canonical format, losslessly; with
    --accept, the reviewed supports of `golden suggest` patches merged in."""
    from kebab_eval_pipeline.golden.convert import render_canonical
    from kebab_eval_pipeline.golden.load import load_golden
    from kebab_eval_pipeline.golden.syntax import SYNTAXES

    if to != "canonical":
        raise InputError(
            "unsupported target format", [Offender("--to", f"{to!r}: only 'canonical' is written")]
        )
    if out_path is not None and out_path.suffix not in SYNTAXES:
        raise InputError("unsupported output file", [Offender(str(out_path), "use .yaml, .json or .jsonl")])
    loaded = load_golden(files, fmt=fmt, options=_options(split, query_field))
    golden, warnings = loaded.golden, list(loaded.warnings)
    accepted = None
    if accept:
        from kebab_eval_pipeline.golden.accept import accept_supports

        patches = []
        for patch in accept:
            read = load_golden(patch, fmt="canonical")
            warnings += read.warnings
            patches.append((str(patch), read.golden))
        accepted = accept_supports(golden, patches)
        golden, warnings = accepted.golden, warnings + list(accepted.warnings)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    text = render_canonical(golden, out_path.suffix if out_path else ".yaml")
    if accepted is not None:
        skipped = f" ({accepted.duplicates} already in the golden set)" if accepted.duplicates else ""
        err.print(
            f"accepted {accepted.added} supports into {accepted.queries} queries{skipped}",
            markup=False,
            highlight=False,
        )
    if out_path is None:
        sys.stdout.write(text)
    else:
        atomic.write_text(out_path, text)
        err.print(f"wrote {len(golden.queries)} queries to {out_path}", markup=False)


def golden_suggest(
    run_id: Annotated[str, typer.Argument(help="The candidate run (b) whose unjudged hits to suggest.")],
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Compare with this run (default: the run's stored comparison)."),
    ] = None,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Patch file to write (.yaml; default: stdout).")
    ] = None,
    only_judged_relevant: Annotated[
        bool,
        typer.Option(
            "--only-judged-relevant",
            help="Only the hits the LLM judge found relevant (needs a judged queue).",
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="Run config: storage, compare settings and the judge (with --baseline)."
        ),
    ] = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Write the suspect-gold queue of a comparison as candidate supports: for each unjudged hit the
    run ranked above its first relevant hit in a loss or regression, a support for its query (a
    canonical golden file, the evidence in comments). Review it, then accept it with
    `golden convert GOLDEN --accept PATCH --to canonical --out NEW`."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.instance import open_store
    from kebab_eval_pipeline.compare.golden_patch import render_patch
    from kebab_eval_pipeline.compare.suspect_gold import SUSPECT_COLUMNS
    from kebab_eval_pipeline.metrics.matching_diagnostics import shortened_headings

    if out_path is not None and out_path.suffix not in (".yaml", ".yml"):
        raise InputError("unsupported patch file", [Offender(str(out_path), "use .yaml or .yml")])
    store = open_store(config, chain, gate)
    if baseline is not None:
        from kebab_eval_pipeline.chain.pipeline import compare_stored

        report = compare_stored(store, baseline, run_id, load_settings(config))
    else:
        report = store.stored_run(run_id).comparison()
        if report is None or report.info.get("run_a") is None:
            why = "it has no stored comparison" if report is None else str(report.info.get("baseline_note"))
            raise InputError(
                "no baseline to compare with",
                [Offender(run_id, f"{why}: pass --baseline RUN_ID", field="--baseline")],
            )
        if report.suspect_gold is None:
            raise InputError(
                "no suspect-gold queue stored",
                [
                    Offender(
                        run_id,
                        "its comparison was stored before the suspect-gold queue existed: pass --baseline "
                        f"{report.info.get('run_a')}",
                        field="--baseline",
                    )
                ],
            )
    queue = report.suspect_gold.astype(SUSPECT_COLUMNS)
    # Queues stored before shortened heading paths were left out: leave them out here too.
    _, shortened = shortened_headings(queue, store.stored_run(run_id).golden.supports)
    if shortened.any():
        queue = queue[~shortened].reset_index(drop=True)
        err.print(
            f"left out {int(shortened.sum())} hits whose heading path is a proper prefix of a gold heading "
            "in the same document (chunks that lost their own section: see the run's matching warnings)",
            markup=False,
            highlight=False,
        )
    if only_judged_relevant:
        if queue["judge_relevant"].isna().all() and len(queue):
            raise InputError(
                "--only-judged-relevant needs the judge's relevance verdicts",
                [
                    Offender(
                        run_id,
                        "the suspect-gold queue was not judged (no judge: block when the comparison was "
                        "made): configure a judge and pass --config and --baseline",
                        field="--only-judged-relevant",
                    )
                ],
            )
        queue = queue[queue["judge_relevant"].fillna(False).to_numpy(dtype=bool)]
    text = render_patch(queue, report.info)
    n_queries = queue["query_id"].nunique()
    if out_path is None:
        sys.stdout.write(text)
    else:
        atomic.write_text(out_path, text)
    err.print(
        f"{len(queue)} suggested supports for {n_queries} queries (run {run_id} vs {report.info['run_a']})"
        + (f": wrote {out_path}" if out_path is not None else ""),
        markup=False,
        highlight=False,
    )


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


def golden_record(
    out_path: Annotated[
        Path,
        typer.Option(
            "--out",
            help="The golden file to append to (.yaml, .yml, .json or .jsonl; created when absent, "
            "validated when present).",
        ),
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config YAML: its system: block is the system searched."),
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=1000, help="Hits shown per question.")] = 10,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Retrieval mode of the reference system: lexical, vector or hybrid."),
    ] = None,
) -> None:
    """Record golden queries from live search: type a question, see the system's top hits, mark
    the relevant ones (1 3, 1-3, all, none); each entry is appended to --out at once (the whole
    file written atomically, earlier entries kept as they are). An empty question, end of input
    or Ctrl-C ends the session."""
    from kebab_eval_pipeline.chain.run_overrides import settings_for_run
    from kebab_eval_pipeline.cli.record_session import RecordSession, system_search
    from kebab_eval_pipeline.golden.record import RecordFile, out_problem
    from kebab_eval_pipeline.systems.factory import build_system

    # --out first, before the config is read or any system started: a place that cannot be
    # written, a second session on the file, or a file that is not a valid canonical set.
    problem = out_problem(out_path)
    if problem is not None:
        raise InputError("cannot record into this file", [Offender(str(out_path), problem, field="--out")])
    out_path.parent.mkdir(parents=True, exist_ok=True)  # the lock file sits beside the golden file
    with atomic.held_elsewhere(out_path) as busy:
        if busy:
            raise InputError(
                "cannot record into this file",
                [Offender(str(out_path), "another golden record session is writing it", field="--out")],
            )
        golden = RecordFile.open(out_path)  # read once the session holds the file
        settings = settings_for_run(config, {"mode": mode} if mode else {})
        system = build_system(settings)
        for w in golden.warnings:
            err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
        out.print(
            f"recording into {out_path} ({len(golden.queries)} queries); system: {settings.system.kind}, "
            f"top {k} hits",
            markup=False,
            highlight=False,
        )
        if golden.text is not None and not golden.in_place:
            out.print(
                f"note: {out_path} is written again in the canonical layout with each entry (JSON, "
                "or YAML whose queries list is empty, in flow style or not the last key): its "
                "comments are not kept",
                markup=False,
                highlight=False,
            )
        session = RecordSession(golden, system_search(system, k), line_asker(), out)
        code = session.run()
    if code:
        raise typer.Exit(code)


def golden_health(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Run config: its golden set, system (index and corpus), storage and golden_health: "
            "thresholds (default: the bundled demo).",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="text (default) | json.")] = "text",
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Check the golden set's health: answerable queries with no relevant support, supports the
    index no longer holds, duplicate questions, questions quoting the corpus, breakdown slices too
    small to conclude on, and the latest comparison's suspect-gold queue. Exit 1 when an answerable
    query has no relevant support (unless golden_health.unsupported_answerable: warn), else 0;
    the other findings warn."""
    if fmt not in ("text", "json"):
        raise InputError("unsupported output format", [Offender("--format", f"{fmt!r}: use text or json")])
    from kebab_eval_pipeline.chain.golden_health_run import check_golden_health
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.instance import open_store
    from kebab_eval_pipeline.golden_health.render import json_document, text_lines

    settings = load_settings(config)
    golden, report = check_golden_health(settings, open_store(config, chain, gate))
    identity = {"name": golden.name, "sha256": golden.sha256, "source": golden.info["source"]}
    if fmt == "json":
        sys.stdout.write(json.dumps(json_document(report, identity), ensure_ascii=False, indent=2) + "\n")
    else:
        for line in text_lines(report, identity):
            out.print(line, markup=False, highlight=False)
    if report.blocking_failure:
        raise typer.Exit(ExitCode.FAILED)


def golden_size(
    run: Annotated[str, typer.Argument(help="A stored run: its per-query scores give the variance.")],
    against: Annotated[
        str | None,
        typer.Option("--against", help="A second stored run over the same golden set: the paired variance."),
    ] = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Metric to size (repeatable; default: the headline).")
    ] = None,
    change: Annotated[
        float | None, typer.Option("--change", help="The change to detect (e.g. 0.02): queries it needs.")
    ] = None,
    queries: Annotated[
        int | None, typer.Option("--queries", help="A golden-set size: the change it would detect.")
    ] = None,
    power: Annotated[float, typer.Option("--power", help="Power (default 0.8).")] = 0.8,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Two-sided level of the test (default 0.05).")
    ] = 0.05,
    by: Annotated[
        str | None, typer.Option("--by", help="Also per slice: tags | category | difficulty | lang | group.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="text (default) | json.")] = "text",
    config: Annotated[Path | None, typer.Option("--config", help="Run config (its storage).")] = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Size a golden set: how many queries a change of --change in a metric needs to be detected
    with --power at --alpha, and the smallest change the run's (or --queries) queries detect — from
    a stored run's per-query scores, paired with --against when a second run exists."""
    import pandas as pd

    from kebab_eval_pipeline.cli.instance import open_store
    from kebab_eval_pipeline.compare.sizing import sizing_table
    from kebab_eval_pipeline.foundation.json_records import json_records
    from kebab_eval_pipeline.metrics import catalogue

    offenders = []
    if fmt not in ("text", "json"):
        offenders.append(Offender("--format", f"{fmt!r}: use text or json"))
    if change is not None and not 0 < change < 1:
        offenders.append(Offender("--change", f"{change!r}: a change of a metric in (0, 1)"))
    if queries is not None and queries < 2:
        offenders.append(Offender("--queries", f"{queries!r}: at least 2"))
    if not 0 < power < 1:
        offenders.append(Offender("--power", f"{power!r}: in (0, 1)"))
    if not 0 < alpha < 0.5:
        offenders.append(Offender("--alpha", f"{alpha!r}: in (0, 0.5)"))
    names = list(metric or [m for m in catalogue.headline_names() if catalogue.metric_column(m) is not None])
    offenders += [
        Offender("--metric", f"{m!r}: not a per-query metric ({catalogue.untestable_reason(m)})")
        for m in names
        if catalogue.metric_column(m) is None
    ]
    if offenders:
        raise InputError("cannot size the golden set", offenders)
    store = open_store(config, chain, gate)
    scores_b = store.stored_run(run).scores.scores
    scores_a = store.stored_run(against).scores.scores if against else None
    try:
        table = sizing_table(
            scores_b,
            names,
            scores_a=scores_a,
            change=change,
            queries=queries,
            alpha=alpha,
            power=power,
            by=by,
        )
    except KeyError:
        raise InputError(
            "cannot size the golden set",
            [Offender("--by", f"{by!r}: not a column of the run's per-query scores")],
        ) from None
    if fmt == "json":
        doc = {
            "run": run,
            "against": against,
            "alpha": alpha,
            "power": power,
            "change": change,
            "queries": queries,
            "rows": json_records(table),
        }
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return
    how = f"paired with {against}" if against else "one run: sd(b − a) taken as the run's own sd (ρ = 0.5)"
    out.print(f"golden-set sizing from {run} ({how}); power {power:g}, two-sided α {alpha:g}", markup=False)
    head = f"{'metric':<16} {'slice':<24} {'n':>6} {'sd':>7} {'MDE at n':>9}"
    head += f" {'MDE at ' + str(queries):>12}" if queries else ""
    head += f" {'n for ±' + format(change, 'g'):>12}" if change else ""
    out.print(head, markup=False, highlight=False)
    for r in table.itertuples(index=False):
        cells = f"{r.metric:<16} {r.slice:<24} {'' if pd.isna(r.n) else r.n:>6} "
        sd, mde = ("" if pd.isna(x) else format(x, ".4f") for x in (r.sd, r.mde))
        cells += f"{sd:>7} {mde:>9}"
        if queries:
            cells += f" {'' if pd.isna(r.mde_at) else format(r.mde_at, '.4f'):>12}"
        if change:
            cells += f" {'' if pd.isna(r.queries_needed) else r.queries_needed:>12}"
        if r.note:
            cells += f"  ({r.note})"
        out.print(cells, markup=False, highlight=False)


def golden_diff(
    a: Annotated[
        str,
        typer.Argument(
            help="The older golden set: a golden file (any format golden validate reads) or a stored "
            "run id (the golden set that run was scored against).",
            show_default=False,
        ),
    ],
    b: Annotated[str, typer.Argument(help="The newer golden set: a golden file or a stored run id.")],
    fmt: Annotated[str, typer.Option("--format", help="md (Markdown, default) | json.")] = "md",
    golden_format: Annotated[
        str,
        typer.Option(
            "--golden-format",
            help="The files' format: auto | canonical | kebab | ckv | supports | wfgy | beir | trec | "
            "ranx (default: sniffed).",
        ),
    ] = "auto",
    split: SplitOption = "test",
    query_field: QueryFieldOption = "title",
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config whose storage holds the stored runs named."),
    ] = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Show what changed from golden set A to golden set B, queries matched by id: the queries
    added, removed, with a changed question, with changed supports (gold hits and their relevance
    grades) and with other gold changed (answerability, answer constraints), with their ids and
    counts. An argument that names an existing file is read as a golden file; any other is a
    stored run id. Exit 0 whatever the difference, 2 on bad input."""
    if fmt not in ("md", "json"):
        raise InputError("unsupported output format", [Offender("--format", f"{fmt!r}: use md or json")])
    from kebab_eval_pipeline.golden.diff import diff_document, diff_golden, diff_markdown

    sides = _DiffSides(golden_format, _options(split, query_field), config, chain, gate)
    (queries_a, supports_a, about_a), (queries_b, supports_b, about_b) = sides.read(a), sides.read(b)
    diff = diff_golden(queries_a, supports_a, queries_b, supports_b)
    if fmt == "json":
        doc = diff_document(diff, about_a, about_b)
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(diff_markdown(diff, about_a, about_b))


class _DiffSides:
    """Reads each side of ``golden diff``: a golden file when the argument names an existing path,
    else a stored run's golden set (the store opened on first need)."""

    def __init__(self, fmt: str, options, config: Path | None, chain: str | None, gate: str | None):
        self.fmt, self.options = fmt, options
        self.config, self.chain, self.gate = config, chain, gate
        self._store = None

    def read(self, spec: str):
        """``(queries, supports, about)`` of one side: its golden tables and what it is."""
        from kebab_eval_pipeline.chain.artifacts import GoldenArtifact

        path = Path(spec)
        if path.exists():
            from kebab_eval_pipeline.golden.load import load_golden

            loaded = load_golden(path, fmt=self.fmt, options=self.options)
            for w in loaded.warnings:
                err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
            golden, kind = GoldenArtifact.from_loaded(loaded), "file"
        else:
            golden, kind = GoldenArtifact.from_tables(*self._stored(spec)), "run"
        about = {
            "source": spec,
            "kind": kind,
            "name": golden.name,
            "sha256": golden.sha256,
            "queries": len(golden.queries),
        }
        return golden.queries, golden.supports, about

    def _stored(self, spec: str):
        from kebab_eval_pipeline.cli.instance import open_store
        from kebab_eval_pipeline.foundation.run_ids import RUN_ID_PATTERN

        if not RUN_ID_PATTERN.fullmatch(spec) or ".." in spec:
            raise InputError("no golden set to diff", [Offender(spec, "no such file, and not a run id")])
        if self._store is None:
            self._store = open_store(self.config, self.chain, self.gate)
        if not self._store.exists("golden_set", spec):
            raise InputError(
                "no golden set to diff",
                [Offender(spec, f"no such file, and no stored run of that id under {self._store.base}")],
            )
        return self._store.read("golden_set", spec)
