"""``kebab-eval``: the helper CLI for what Dagster's own CLI does not do (SPEC §12).

Exit codes: 0 success; 1 a blocking gate failed or the system under test failed (system_health);
2 bad input or usage — a message naming each offender (file, position, query id, field, reason);
3 an unexpected internal failure — one paragraph (``KEBAB_EVAL_DEBUG=1`` shows the traceback);
4 refused because another run of the same run id is in progress (or replaced this run's
results while it ran). Never a traceback otherwise.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from kebab_eval_pipeline import atomic, run_lock
from kebab_eval_pipeline.cli_help import tidy
from kebab_eval_pipeline.errors import (
    GateFailure,
    InputError,
    Offender,
    RunInProgress,
    SystemHealthFailure,
)
from kebab_eval_pipeline.judge.cli import judge_app
from kebab_eval_pipeline.terminal import make_console

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Evaluate RAG/search systems against golden sets; each run is a Dagster partition.",
)
runs_app = typer.Typer(no_args_is_help=True, help="Register and list run partitions.")
golden_app = typer.Typer(no_args_is_help=True, help="Validate, convert and describe golden sets.")
app.add_typer(runs_app, name="runs")
app.add_typer(golden_app, name="golden")
baseline_app = typer.Typer(
    no_args_is_help=True, help="Pin, show and clear the baseline run of each golden set."
)
app.add_typer(baseline_app, name="baseline")

# On a terminal: fitted to it; piped or redirected: never wrapped (see terminal.py).
out = make_console()
err = make_console(stderr=True)

DEFAULT_HOME = Path(".kebab-eval") / "dagster_home"


#: What the CLI writes into a dagster.yaml it creates: the tool runs offline, so Dagster's usage
#: statistics are off (and its telemetry banner never opens the output), and the webserver's
#: "Join the Dagster community" dialog (its ``nux``) does not cover the asset graph on a first visit.
TELEMETRY_OFF = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
#: What older versions wrote into the project-local home: upgraded to TELEMETRY_OFF on first use.
_OLD_OWN_CONFIGS = ("", "telemetry:\n  enabled: false")


_own_home: Path | None = None  # the project-local home this process chose, if it chose one


def _home() -> tuple[Path, bool]:
    """The Dagster home — $DAGSTER_HOME, else a project-local one (announced on stderr and set in
    the environment, so the default artifact storage is anchored beside it) — and whether it is that
    project-local one. Imports no Dagster and opens no instance: commands that only read stored
    artifacts stop here. InputError when $DAGSTER_HOME is relative."""
    global _own_home
    if not os.environ.get("DAGSTER_HOME"):
        _own_home = DEFAULT_HOME.resolve()
        os.environ["DAGSTER_HOME"] = str(_own_home)
        err.print(
            f"[dim]DAGSTER_HOME not set; using {_own_home} (export it to share runs with `dagster dev`)[/dim]"
        )
    home = Path(os.environ["DAGSTER_HOME"]).expanduser()
    if not home.is_absolute():
        raise InputError(
            "DAGSTER_HOME must be an absolute path", [Offender("DAGSTER_HOME", f"{str(home)!r} is relative")]
        )
    # "own" survives a second call (the first one set $DAGSTER_HOME)
    return home, _own_home is not None and str(home) == str(_own_home)


def _instance():
    """The Dagster instance at $DAGSTER_HOME; when unset, a project-local one (announced on stderr).

    A missing dagster.yaml is created with telemetry and the community dialog disabled (so is our
    own empty or telemetry-only one in the project-local home, from older versions). A user's
    dagster.yaml is never rewritten: when it does not mention telemetry, this process's instance
    runs with telemetry off — which also keeps Dagster's telemetry banner out of the output; an
    explicit ``telemetry:`` setting is obeyed.
    """
    home, own = _home()
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    config = home / "dagster.yaml"
    # Dagster creates its SQLite tables on first use without a lock: several commands starting at
    # once on a new home can corrupt the schema version for good, so creation is serialised here.
    with atomic.locked(config):
        if not config.exists() or (own and config.read_text(encoding="utf-8").strip() in _OLD_OWN_CONFIGS):
            atomic.write_text(config, TELEMETRY_OFF)
        if _mentions_telemetry(config):
            return DagsterInstance.get()
        ref = InstanceRef.from_dir(str(home), overrides={"telemetry": {"enabled": False}})
        return DagsterInstance.from_ref(ref)


def _mentions_telemetry(config: Path) -> bool:
    """Whether a dagster.yaml sets ``telemetry`` (an unreadable one: Dagster reports it on load)."""
    import yaml

    try:
        doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return True
    return isinstance(doc, dict) and "telemetry" in doc


def _store(config: Path | None = None):
    from kebab_eval_pipeline.settings import load_settings
    from kebab_eval_pipeline.storage import ArtifactStore, default_storage_base

    _home()  # anchors the default storage beside the instance (without opening it)
    return ArtifactStore(default_storage_base(load_settings(config).storage))


def _fmt(v) -> str:
    return "null" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


@app.command()
def run(
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", help="Partition key (default: ci-<UTC time>-<commit> in CI, else <user>-<UTC time>)."
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Run config YAML (system, gates, storage, judge, …).")
    ] = None,
    golden: Annotated[
        str | None, typer.Option("--golden", help="Golden file (overrides the config).")
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="reference | command | http | replay (its settings come from the config's system block).",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Retrieval mode of the reference system: lexical, vector or hybrid."),
    ] = None,
    answers: Annotated[
        bool | None, typer.Option("--answers/--no-answers", help="Ask for answers too.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="auto (the golden set's pinned baseline, else previous) | previous (the most recent "
            "earlier run on the same golden sha256) | pinned | none | <run_id>.",
        ),
    ] = None,
    chunk_size: Annotated[int | None, typer.Option("--chunk-size", help="Reference chunker size.")] = None,
    judge: Annotated[
        bool | None,
        typer.Option(
            "--judge/--no-judge",
            help="Turn the LLM judge on (the config's judge: block, else the default local judge) or off.",
        ),
    ] = None,
) -> None:
    """Register a run partition and materialize the whole chain in-process."""
    from kebab_eval_pipeline.progress_display import progress_interval
    from kebab_eval_pipeline.run_ids import TRIGGER_TAG, check_run_id, in_ci, new_run_id
    from kebab_eval_pipeline.run_overrides import config_path, settings_for_run
    from kebab_eval_pipeline.settings import SYSTEM_KINDS

    if system not in (None, *SYSTEM_KINDS):
        raise InputError(
            "unknown system kind",
            [Offender("--system", f"{system!r}: expected one of {', '.join(SYSTEM_KINDS)}")],
        )
    run_id = check_run_id(new_run_id() if run_id is None else run_id)
    overrides = {
        k: v
        for k, v in {
            "golden": golden,
            "system_kind": system,
            "mode": mode,
            "answers": answers,
            "baseline": baseline,
            "chunk_size": chunk_size,
            "judge": judge,
        }.items()
        if v is not None
    }
    _home()  # anchors the default storage beside the instance (opened only once the inputs are good)
    # Fail fast on a bad config, bad golden input, a stale golden set, a missing source_root or
    # judge model, storage that cannot be reached — before any run exists, and before Dagster is
    # imported or an instance opened (seconds under load): the same settings the run will use.
    # The config and golden files first: a typo'd key or a missing or bad golden file is refused
    # before even pandas is imported.
    settings = settings_for_run(config, overrides)
    from kebab_eval_pipeline.golden.load import load_golden

    golden_file = load_golden(settings.golden_path())

    from kebab_eval_pipeline.gates import check_gate_names
    from kebab_eval_pipeline.pipeline import (
        check_golden_against_system,
        check_run_inputs,
        headline,
        load_golden_artifact,
    )
    from kebab_eval_pipeline.storage import ArtifactStore, check_storage_reachable, default_storage_base
    from kebab_eval_pipeline.systems.factory import build_system

    check_gate_names(settings, source=config_path(config) or "<defaults>")
    check_run_inputs(settings)
    check_storage_reachable(default_storage_base(settings.storage))
    progress_interval()  # a bad KEBAB_EVAL_PROGRESS_INTERVAL is exit 2 here, not after registering
    loaded = load_golden_artifact(settings, golden_file)
    for warning in [
        *loaded.info["warnings"],
        *check_golden_against_system(settings, loaded, build_system(settings)),
    ]:
        err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)

    from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions
    from kebab_eval_pipeline.orchestration.assets import observe_inputs
    from kebab_eval_pipeline.orchestration.partitions import eval_runs

    instance = _instance()
    defs = build_definitions(config, overrides=overrides)
    base = defs.resources["artifact_storage"].base
    dagster_run_id = str(uuid.uuid4())
    # One writer per run id: refused (exit 4) while another run of it is in progress; held until
    # the numbers are printed, so they are this run's.
    with run_lock.holding(base, run_id, dagster_run_id, instance):
        instance.add_dynamic_partitions(eval_runs.name, [run_id])
        observe_inputs(instance, settings)
        job = defs.resolve_job_def(JOB_NAME)

        result = _execute(
            job,
            instance,
            run_id,
            len(loaded.queries),
            tags={TRIGGER_TAG: "ci" if in_ci() else "cli"},
            dagster_run_id=dagster_run_id,
        )

        store = ArtifactStore(base)
        _check_own_results(store, run_id, result)
        if not _written_by(store, "run_metrics", run_id, result.run_id):
            _raise_run_failure(result, run_id)
        _print_run(store, run_id, settings.k, headline)
    if not result.success:
        _raise_run_failure(result, run_id)


def _writer(store, asset: str, run_id: str) -> str | None:
    """The Dagster run that wrote the stored ``asset`` of ``run_id`` (None: not stored)."""
    return (store.manifest(asset, run_id) or {}).get("dagster_run_id")


def _written_by(store, asset: str, run_id: str, dagster_run_id: str) -> bool:
    """Whether the stored ``asset`` of ``run_id`` was written by Dagster run ``dagster_run_id``."""
    return _writer(store, asset, run_id) == dagster_run_id


def _check_own_results(store, run_id: str, result) -> None:
    """Every asset this run materialized must still be stored as this run wrote it; otherwise
    another run of the same run id replaced it, and its numbers are not this run's (RunInProgress)."""
    for event in result.get_asset_materialization_events():
        asset = event.asset_key.path[-1]
        writer = _writer(store, asset, run_id)
        if writer != result.run_id:
            raise RunInProgress(
                f"run {run_id}: the stored {asset} was written by Dagster run "
                f"{writer}, not by this one ({result.run_id}): another run of "
                "the same run id replaced it; its numbers are not shown as this run's"
            )


#: Dagster events the CLI states itself, in one line or paragraph (`_raise_run_failure`): a failed
#: step (with its Python stack trace), the run's failure, and the steps skipped after it.
_STATED_EVENTS = frozenset({"STEP_FAILURE", "RUN_FAILURE", "PIPELINE_FAILURE"})


class _StatedFailureRecords(logging.Filter):
    """Drops Dagster's console records of what the CLI reports itself: a failed blocking asset check
    (the gate or system-health verdict, exit 1), a failed step and the run failure (bad input:
    the same one-line-per-offender message as at load, exit 2; anything else one paragraph, exit 3)
    and the "Dependencies for step … Not executing" lines that follow. Dagster prints these with
    Python stack traces; ``KEBAB_EVAL_DEBUG=1`` keeps them. The instance's event log is untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        if os.environ.get("KEBAB_EVAL_DEBUG"):
            return True
        if "DagsterAssetCheckFailedError" in record.getMessage():
            return False
        event = getattr(record, "dagster_event", None)
        if getattr(event, "event_type_value", None) in _STATED_EVENTS:
            return False
        return not (record.levelno >= logging.ERROR and "Dependencies for step" in record.getMessage())


@contextmanager
def _quiet_stated_failures():
    """Loggers created meanwhile (Dagster's console logger is made per run, from the logging
    module's logger class) carry :class:`_StatedFailureRecords`; the instance's event log is untouched."""
    previous = logging.getLoggerClass()

    class _Logger(previous):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.addFilter(_StatedFailureRecords())

    logging.setLoggerClass(_Logger)
    try:
        yield
    finally:
        logging.setLoggerClass(previous)


def _execute(job, instance, run_id: str, total: int, tags: dict, asset_selection=None, dagster_run_id=None):
    """Run ``job`` for partition ``run_id`` in-process (as Dagster run ``dagster_run_id``, the owner
    of the partition's lock) with its progress on stderr (stage name, queries done; progress_display.py:
    live on a terminal, periodic lines otherwise; ``total`` is unused: each stage reports its own
    count); Dagster's DEBUG event stream stays in the instance
    (and the UI), the terminal gets the progress and warnings only."""
    from kebab_eval_pipeline.progress_display import progress_display

    with progress_display(err), _quiet_stated_failures():
        return job.execute_in_process(
            partition_key=run_id,
            instance=instance,
            raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            tags=tags,
            asset_selection=asset_selection,
            run_id=dagster_run_id,
        )


JUDGED_ASSETS = ("judge", "query_scores", "run_metrics", "comparison_report")


@app.command()
def rejudge(
    run_id: Annotated[str, typer.Argument(help="A stored run (partition) to judge again.")],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="The run's config YAML; its judge: block is the judge (default: local)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Another judge model (a local path, or the endpoint's name)."),
    ] = None,
    prompt_version: Annotated[
        str | None, typer.Option("--prompt-version", help="Another judge prompt version (v1, v1-alt).")
    ] = None,
) -> None:
    """Judge a stored run again — with the current judge or another model or prompt version — from
    its stored golden set and results: the system under test is not called. Re-materializes judge,
    query_scores, run_metrics and comparison_report of the partition; cached judgements (same model
    digest, prompt version and input) cost no model call."""
    from dagster import AssetKey

    from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
    from kebab_eval_pipeline.pipeline import check_run_inputs, headline
    from kebab_eval_pipeline.run_ids import TRIGGER_TAG
    from kebab_eval_pipeline.storage import ArtifactStore, check_run_id

    run_id = check_run_id(run_id)
    instance = _instance()
    overrides = {"judge": True, "judge_model": model, "judge_prompt_version": prompt_version}
    defs = build_definitions(config, overrides={k: v for k, v in overrides.items() if v is not None})
    settings = run_settings(defs)
    check_run_inputs(settings)
    store = ArtifactStore(defs.resources["artifact_storage"].base)
    if not store.exists("retrieval_results", run_id) or not store.exists("run_metrics", run_id):
        raise InputError(
            "nothing to re-judge",
            [Offender(run_id, f"no stored results for this run under {store.base}", field="run_id")],
        )
    stored = store.read("run_metrics", run_id)[1]
    stored.setdefault("relevance_level", 1)  # runs stored before the level was recorded
    differs = [
        Offender(
            str(config or "<defaults>"),
            f"the run was scored with {key}={stored.get(key)!r}, this config says {getattr(settings, key)!r}",
            field=key,
        )
        for key in ("k", "mrr_cutoff", "match", "relevance_level")
        if key in stored and stored[key] != getattr(settings, key)
    ]
    if differs:
        raise InputError(f"run {run_id} was scored with other settings: pass the config it ran with", differs)
    n_queries = stored.get("golden", {}).get("queries", 0)
    dagster_run_id = str(uuid.uuid4())
    with run_lock.holding(str(store.base), run_id, dagster_run_id, instance):
        result = _execute(
            defs.resolve_job_def(JOB_NAME),
            instance,
            run_id,
            n_queries,
            tags={TRIGGER_TAG: "rejudge"},
            asset_selection=[AssetKey(name) for name in JUDGED_ASSETS],
            dagster_run_id=dagster_run_id,
        )
        _check_own_results(store, run_id, result)
        if not _written_by(store, "run_metrics", run_id, result.run_id):
            _raise_run_failure(result, run_id)
        _print_run(store, run_id, settings.k, headline)
    if not result.success:
        _raise_run_failure(result, run_id)


def _raise_run_failure(result, run_id: str) -> None:
    """Turn a failed in-process run into InputError (bad input), SystemHealthFailure (the system
    under test failed), GateFailure (a blocking gate or check, named with its reason),
    RunInProgress (another process runs this partition) or, for anything else, RuntimeError
    (exit 3) naming the step and its error."""
    from kebab_eval_pipeline.health import CHECK_NAME
    from kebab_eval_pipeline.orchestration.assets import INPUT_ERROR_KEY

    failed_checks = {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.blocking and e.severity.value == "ERROR"
    }
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        error = event.step_failure_data.error
        chain = []
        while error is not None:
            chain.append(error)
            error = error.cause
        if any(e.cls_name == "DagsterAssetCheckFailedError" for e in chain):
            health = failed_checks.pop(CHECK_NAME, None)
            if health is not None:
                also = f" (and {len(failed_checks)} blocking gate(s) failed)" if failed_checks else ""
                raise SystemHealthFailure(f"run {run_id}: {health.description}{also}")
            # a check before run_metrics (matching_coverage: fail) stops the chain: no gate table
            named = "; ".join(f"{name}: {e.description}" for name, e in failed_checks.items())
            raise GateFailure(
                f"run {run_id}: blocking check(s) failed: {named or 'see the gate table above'}"
            )
        # Bad input found inside a step: the same message as at load (exit 2), not the step's frames.
        user = event.step_failure_data.user_failure_data
        if user is not None and INPUT_ERROR_KEY in (user.metadata or {}):
            raise InputError((user.description or "").strip())
        for e in chain:  # messages read "kebab_eval_pipeline.errors.InputError: <message>"
            if e.cls_name == "InputError":
                raise InputError(e.message.split(": ", 1)[-1].strip())
            if e.cls_name == "RunInProgress":  # another process holds this partition (exit 4)
                raise RunInProgress(e.message.split(": ", 1)[-1].strip())
        raise RuntimeError(f"run {run_id} failed in step {event.step_key}: {chain[-1].message.strip()}")
    raise RuntimeError(f"run {run_id} failed")


def _print_health(info: dict) -> None:
    """The system-health verdict when any query failed: red when it fails the run, else yellow."""
    verdict = info.get("system_health")
    if not verdict or not verdict["failed"]:
        return
    from kebab_eval_pipeline.health import failed_run

    if failed_run(verdict):
        state, colour = "FAIL", "red"
    else:
        state, colour = "warn", "yellow"
    out.print(
        f"  [{colour}]{state:4}[/{colour}] {escape(verdict['message'])} (see `kebab-eval export`)",
        highlight=False,
    )


def _print_matching(info: dict) -> None:
    """The criterion that matched the hits to the golden set, and why matching may score 0."""
    from kebab_eval_pipeline.matching_diagnostics import match_line

    line = match_line(info)
    if line is not None:
        out.print(f"  match: {escape(line)}", highlight=False)
    for w in info.get("matching_warnings") or []:
        # escape(): user and system text is never rich markup (a "[/x]" in it would crash the print).
        out.print(
            f"  [yellow]warning[/yellow] matching ({escape(w['field'])}): {escape(w['message'])}",
            highlight=False,
        )


def _print_run(store, run_id: str, ks: list[int], headline) -> None:
    from kebab_eval_pipeline.compare.report import render_run_markdown
    from kebab_eval_pipeline.compare.runs import ComparisonArtifact, RunMetricsArtifact
    from kebab_eval_pipeline.compare.systems import verdict_count_text
    from kebab_eval_pipeline.systems.label import system_label

    metrics = RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id))
    # A line of its own, not the table's title: a title wraps to the (narrow) table's width.
    out.print(
        f"run {run_id} — {metrics.info['golden']['name']} "
        f"({metrics.info['golden']['queries']} queries, {system_label(metrics.info['system'])})",
        markup=False,
        highlight=False,
        style="italic",
    )
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("n", justify="right")
    for name, value in headline(metrics.metrics, ks).items():
        table.add_row(name, _fmt(value), str(metrics.denominators.get(name, "")))
    out.print(table)
    _print_matching(metrics.info)
    _print_health(metrics.info)
    gates = metrics.info.get("gates", [])
    for g in gates:
        state = "skip" if g["skipped"] else "pass" if g["passed"] else ("FAIL" if g["blocking"] else "warn")
        colour = {"pass": "green", "FAIL": "red", "warn": "yellow", "skip": "dim"}[state]
        out.print(f"  gate [{colour}]{state:4}[/{colour}] {escape(g['name'])}: {escape(g['reason'])}")
    reports = Path(str(store.base)) / "reports" / run_id if "://" not in str(store.base) else None
    if reports is not None:
        reports.mkdir(parents=True, exist_ok=True)
        atomic.write_text(
            (reports / "run.md"),
            render_run_markdown(run_id, metrics.info, metrics.metrics, metrics.breakdowns, gates),
        )
        if store.exists("comparison_report", run_id):
            comparison = ComparisonArtifact.from_tables(*store.read("comparison_report", run_id))
            atomic.write_text((reports / "comparison.md"), comparison.markdown)
            counts = verdict_count_text(comparison.info)  # neutral words for two systems
            out.print(
                f"comparison: {escape(str(comparison.info.get('baseline_note')))}"
                + (f"; verdicts: {counts}" if counts else "")
            )
            for warning in comparison.info.get("warnings", []):
                out.print(f"  [yellow]warning[/yellow] {escape(warning)}", highlight=False)
            html = store.file_path("comparison_report", run_id, "comparison.html")
            if html is not None:
                out.print(f"comparison report: {html}", soft_wrap=True, highlight=False)
        out.print(f"report: {reports / 'run.md'}", soft_wrap=True, highlight=False)


@runs_app.command("add")
def runs_add(
    run_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            help="Partition key (default: ci-<UTC time>-<commit> in CI, else <user>-<UTC time>).",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only the run id (for RUN_ID=$(kebab-eval runs add -q))."),
    ] = False,
) -> None:
    """Register a run partition only (then `dagster asset materialize --partition ID`).

    Without ID a new one is made (`kebab-eval runs add -q` prints just that id). Also records the
    golden hash and index version the run will read (config from $KEBAB_EVAL_CONFIG, as the code
    location loads it).
    """
    from kebab_eval_pipeline.definitions import CONFIG_ENV
    from kebab_eval_pipeline.orchestration.assets import observe_inputs
    from kebab_eval_pipeline.orchestration.partitions import eval_runs
    from kebab_eval_pipeline.run_ids import new_run_id
    from kebab_eval_pipeline.settings import load_settings
    from kebab_eval_pipeline.storage import check_run_id

    instance = _instance()
    run_id = check_run_id(new_run_id() if run_id is None else run_id)
    observe_inputs(instance, load_settings(os.environ.get(CONFIG_ENV) or None))
    if instance.has_dynamic_partition(eval_runs.name, run_id):
        out.print(run_id if quiet else f"run {run_id} is already registered", highlight=False)
        return
    instance.add_dynamic_partitions(eval_runs.name, [run_id])
    out.print(
        run_id if quiet else f"registered run {run_id} (DAGSTER_HOME={os.environ['DAGSTER_HOME']})",
        soft_wrap=True,
        highlight=False,
    )


@runs_app.command("list")
def runs_list(
    config: Annotated[Path | None, typer.Option("--config", help="Run config YAML (for `storage`).")] = None,
) -> None:
    """Registered run partitions, oldest first, and whether their metrics are stored.

    `started` is the UTC time in a generated id, else the run's created_at; runs with neither
    follow in the order they were registered.
    """
    from kebab_eval_pipeline.registered_runs import registered_runs
    from kebab_eval_pipeline.run_ids import run_started, sort_run_ids
    from kebab_eval_pipeline.tables import Field

    store = _store(config)
    created = {m["run_id"]: m.get("info", {}).get("created_at") for m in store.runs("run_metrics")}
    # the registered ids straight from a default SQLite instance: no Dagster import for a listing
    keys = sort_run_ids(registered_runs(_home()[0], _instance), created)
    starts = [run_started(key, created.get(key)) for key in keys]
    shown = ["" if t is None else f"{t.astimezone(UTC):%Y-%m-%d %H:%M:%S}" for t in starts]
    _print_runs_table(
        Field("run_id", keys),
        Field("started (UTC)", shown),
        labels=[Field("metrics stored", ["yes" if key in created else "no" for key in keys])],
    )


def _print_runs_table(run_id, time, labels=(), numbers=()) -> None:
    """A table of runs fitted to the terminal (tables.py: never an id split; piped: never wrapped)."""
    from kebab_eval_pipeline.tables import fit_runs_table

    fitted = fit_runs_table(out, run_id, time, labels, numbers, width=out.width if out.is_terminal else None)
    out.print(fitted.renderable, soft_wrap=fitted.soft_wrap)
    if fitted.dropped:
        out.print(
            f"({', '.join(fitted.dropped)}: not shown at this width)",
            markup=False,
            highlight=False,
            style="dim",
        )


ConfigOption = Annotated[Path | None, typer.Option("--config", help="Run config YAML (for `storage`).")]


@baseline_app.command("set")
def baseline_set(
    run_id: Annotated[str, typer.Argument(help="The stored run to pin.")], config: ConfigOption = None
) -> None:
    """Pin a stored run as the baseline of its golden set (replacing any earlier pin).

    Used when a run's `baseline` is `auto` (the default) or `pinned`.
    """
    from kebab_eval_pipeline.compare.baseline import pin_baseline

    pin = pin_baseline(_store(config), run_id)
    replaced = f" (replaces {pin['replaced']})" if pin["replaced"] not in (None, run_id) else ""
    out.print(
        f"pinned {run_id} as the baseline of golden set {pin['golden']!r} "
        f"at sha256 {pin['golden_sha256'][:12]}…{replaced}",
        markup=False,
        highlight=False,
    )


@baseline_app.command("show")
def baseline_show(
    config: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the pins as JSON.")] = False,
) -> None:
    """The pinned baseline of each golden set."""
    from kebab_eval_pipeline.compare.baseline import read_pins

    store = _store(config)
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


@baseline_app.command("clear")
def baseline_clear(
    golden: Annotated[
        str | None, typer.Option("--golden", help="Golden set name (needed when several are pinned).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Remove a pinned baseline; runs with `baseline: auto` then compare with the previous run."""
    from kebab_eval_pipeline.compare.baseline import unpin_baseline

    cleared = unpin_baseline(_store(config), golden)
    if not cleared:
        out.print("no pinned baselines")
    for name in cleared:
        out.print(f"cleared the pinned baseline of golden set {name!r}", markup=False, highlight=False)


FormatOption = Annotated[
    str, typer.Option("--format", help="auto | canonical | kebab | ckv | supports | wfgy (default: sniffed).")
]


@golden_app.command("validate")
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
            from kebab_eval_pipeline.systems.probe import probe_system

            probe = probe_system(settings, artifact, system)
    for w in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    summary = golden_summary(artifact.queries)
    out.print(f"ok: {summary_line(summary)} format {loaded.golden.format}", markup=False, highlight=False)
    if probe is not None:
        _print_probe(settings.system.kind, probe)
        if probe.error is not None:
            raise typer.Exit(1)


def _print_probe(kind: str, probe) -> None:
    """The system check of `golden validate --config`: checked, warnings, not checked, failure."""
    out.print(f"system check ({kind}):", highlight=False)
    for line in probe.checked:
        out.print(f"  checked: {line}", markup=False, highlight=False, soft_wrap=True)
    for line in probe.warnings:
        out.print(f"  [yellow]warning[/yellow] {escape(line)}", highlight=False, soft_wrap=True)
    for line in probe.not_checked:
        out.print(f"  not checked: {line}", markup=False, highlight=False, soft_wrap=True)
    if probe.error is not None:
        err.print(f"error: system check failed: {probe.error}", markup=False, highlight=False)


@golden_app.command("convert")
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
        err.print(f"wrote {len(loaded.golden.queries)} queries to {out_path}")


@golden_app.command("schema")
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


@app.command()
def compare(
    a: Annotated[str, typer.Argument(help="Baseline run id.")],
    b: Annotated[str, typer.Argument(help="Candidate run id (delta = B − A).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the standalone HTML report (with charts) here.")
    ] = None,
    strict_chunker_version: Annotated[
        bool,
        typer.Option(
            "--strict-chunker-version", help="Refuse (exit 2) when the runs' chunker versions differ."
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config: storage, compare settings and regression gates."),
    ] = None,
) -> None:
    """Compare two stored runs (delta = B − A): the same report as the comparison_report asset.

    Exit 1 when a blocking regression or verdict gate of --config fails."""
    from kebab_eval_pipeline.compare.document import render_json, render_report_html
    from kebab_eval_pipeline.compare.runs import compare_bundles, load_bundle
    from kebab_eval_pipeline.gates import check_gate_names, evaluate_comparison_gates
    from kebab_eval_pipeline.settings import load_settings

    settings = load_settings(config)
    check_gate_names(settings, str(config) if config else "<config>")
    store = _store(config)
    report = compare_bundles(
        load_bundle(store, a),
        load_bundle(store, b),
        strict_chunker_version=strict_chunker_version or None,
        baseline_note=f"baseline {a!r} (given on the command line)",
        options=settings.compare,
    )
    gates = evaluate_comparison_gates(settings, report)
    if html is not None:
        atomic.write_text(html, render_report_html(report))
        err.print(f"wrote {html}")
    if as_json:
        sys.stdout.write(render_json(report, [g.as_dict() for g in gates]))
    else:
        out.print(report.markdown, markup=False, highlight=False)
    for g in gates:
        state = "skip" if g.skipped else "pass" if g.passed else ("FAIL" if g.blocking else "warn")
        err.print(f"gate {state:4} {g.name}: {g.reason}", markup=False, highlight=False)
    failed = [g for g in gates if g.blocking and not g.passed]
    if failed:
        raise GateFailure(f"{len(failed)} blocking gate(s) failed: " + ", ".join(g.name for g in failed))


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(help="The stored run to export.")],
    fmt: Annotated[str, typer.Option("--format", help="json or trec.")] = "json",
    out_path: Annotated[
        Path | None, typer.Option("--out", help="File to write (json: default stdout).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Export a stored run as JSON (its metrics, gates, versions and per-query scores) or a TREC run
    file + qrels."""
    from kebab_eval_pipeline.export import export_json, export_trec, finite_json

    store = _store(config)
    if fmt == "json":
        doc, nulled = finite_json(export_json(store, run_id))
        if nulled:  # an older run stored impossible numbers: JSON has no inf/NaN, so null + say so
            shown = ", ".join(nulled[:5]) + (", …" if len(nulled) > 5 else "")
            err.print(
                f"warning: run {run_id} stored {len(nulled)} non-finite number(s), written as null: {shown}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        if out_path:
            atomic.write_text(out_path, text)
            err.print(f"wrote {out_path}")
        else:
            sys.stdout.write(text)
    elif fmt == "trec":
        run_file, qrels, docnos = export_trec(store, run_id, out_path or Path(f"{run_id}.trec"))
        err.print(f"wrote {run_file}, {qrels} and {docnos} (what each docno stands for)")
    else:
        raise InputError("unknown export format", [Offender("--format", f"{fmt!r}: use json or trec")])


@app.command()
def history(
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Metric(s) to show (repeatable).")
    ] = None,
    config: ConfigOption = None,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Print CSV (for scripts and CI) instead of a table.")
    ] = False,
) -> None:
    """Headline metrics across stored runs, oldest first."""
    from kebab_eval_pipeline.history import metric_history

    frame = metric_history(_store(config), metric)
    if as_csv:
        sys.stdout.write(frame.to_csv(index=False, na_rep="null"))
        return
    if frame.empty:
        out.print("no stored runs")
        return
    from kebab_eval_pipeline.tables import Field

    def cells(column: str) -> list[str]:
        return [_fmt(None if (isinstance(v, float) and v != v) else v) for v in frame[column]]

    fixed = ("run_id", "created_at", "golden", "chunker_version")
    _print_runs_table(
        Field("run_id", cells("run_id")),
        Field("created_at", cells("created_at")),
        labels=[Field(c, cells(c)) for c in ("golden", "chunker_version")],
        numbers=[Field(str(c), cells(c)) for c in frame.columns if c not in fixed],
    )


def _mount_reference_cli() -> None:
    try:
        from kebab_eval_pipeline.systems.reference.cli import ref_app
    except ImportError:  # the reference CLI is optional at import time
        return
    app.add_typer(ref_app, name="ref", help="The built-in reference RAG system: index, search, ask.")


_mount_reference_cli()
app.add_typer(judge_app, name="judge")


def _value_options() -> set[str]:
    """Option names (``--golden``, ``-o``) that take a value in some command and are a flag in none."""
    valued, flags = set(), set()

    def walk(command) -> None:
        for param in command.params:
            if param.param_type_name == "option":  # typer may vendor its own click: no isinstance
                names = [*param.opts, *param.secondary_opts]
                (flags if param.is_flag or param.count else valued).update(names)
        for child in getattr(command, "commands", {}).values():
            walk(child)

    walk(typer.main.get_command(app))
    return valued - flags


def empty_option_values(args: list[str]) -> list[Offender]:
    """Options given an empty value (``--golden ""``, ``--config=``): each would silently mean the
    default (the bundled demo, the current folder, a new run id), so each is refused, named."""
    valued = _value_options()
    offenders = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in valued and (
            (eq and not value.strip()) or (not eq and i + 1 < len(args) and not args[i + 1].strip())
        ):
            offenders.append(Offender(name, "empty value: give one, or leave the option out"))
    return offenders


def main() -> None:
    """Console-script entry: map errors to exit codes, never a traceback.

    0 success; 1 a blocking gate or the system-health check failed; 2 bad input or usage (one line
    per offender); 3 an unexpected internal failure (one paragraph; ``KEBAB_EVAL_DEBUG=1`` raises
    it with its traceback); 4 another run of the same run id is in progress.
    """
    try:
        empty = empty_option_values(sys.argv[1:])
        if empty:
            raise InputError("empty option value", empty)
        # Outside standalone mode click *returns* the code of a `typer.Exit` instead of exiting.
        # tidy: help printed as written (no swallowed [words], no mid-sentence breaks, no <bool>).
        code = tidy(typer.main.get_command(app))(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except InputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(2)
    except RunInProgress as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        sys.exit(4)
    except SystemHealthFailure as exc:
        err.print(f"[red]system failed:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(1)
    except GateFailure as exc:
        err.print(f"gate failed: {exc}", markup=False, highlight=False)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:  # Ctrl-C: the shell's code for SIGINT, not 1 (a failed gate)
        sys.exit(130)
    except Exception as exc:
        # Usage errors: typer may vendor its own click, so recognise ClickException by name.
        if any(cls.__name__ == "ClickException" for cls in type(exc).__mro__):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("KEBAB_EVAL_DEBUG"):
            raise
        if isinstance(exc, OSError) and exc.filename is not None:
            # A path that cannot be written or read (permissions, a full disk, a folder in the
            # way): bad input, named with the file, not an internal failure.
            err.print(f"error: {exc.filename}: {exc.strerror or exc}", markup=False, highlight=False)
            sys.exit(2)
        # A bug or an environment failure, not bad input: one paragraph, not a traceback.
        # Exit 3, never 1: CI must tell a crash from a failed gate.
        err.print(
            f"error: {type(exc).__name__}: {exc}\n"
            "(an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)",
            markup=False,
            highlight=False,
        )
        sys.exit(3)


if __name__ == "__main__":
    main()
