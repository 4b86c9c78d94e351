"""The Dagster home and instance the CLI runs in, and the run store it reads.

Commands that only read stored artifacts never import Dagster or open the instance: they stop at
:func:`dagster_home`, which anchors the default storage beside the instance.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError, Offender

if TYPE_CHECKING:  # the store pulls in pandas: imported by the commands that read it
    from kebab_eval_pipeline.store.runs import RunStore

DEFAULT_HOME = Path(".kebab-eval") / "dagster_home"


#: What the CLI writes into a dagster.yaml it creates: the tool runs offline, so Dagster's usage
#: statistics are off (and its telemetry banner never opens the output), and the webserver's
#: "Join the Dagster community" dialog (its ``nux``) does not cover the asset graph on a first visit.
TELEMETRY_OFF = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"


#: What older versions wrote into the project-local home: upgraded to TELEMETRY_OFF on first use.
_OLD_OWN_CONFIGS = ("", "telemetry:\n  enabled: false")


#: What this process's instance loads when the user's dagster.yaml does not mention telemetry: the
#: user's settings with telemetry off, in a file of ours beside it (the user's file is never
#: rewritten; Dagster reads the instance's settings from one file, so the override is that file).
TELEMETRY_OFF_COPY = ".kebab-eval-dagster.yaml"


_own_home: Path | None = None  # the project-local home this process chose, if it chose one


def dagster_home() -> tuple[Path, bool]:
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


def open_instance():
    """The Dagster instance at $DAGSTER_HOME; when unset, a project-local one (announced on stderr).

    A missing dagster.yaml is created with telemetry and the community dialog disabled (so is our
    own empty or telemetry-only one in the project-local home, from older versions). A user's
    dagster.yaml is never rewritten: when it does not mention telemetry, this process's instance
    runs with telemetry off (its settings read from :data:`TELEMETRY_OFF_COPY` beside it) — which
    also keeps Dagster's telemetry banner out of the output; an explicit ``telemetry:`` setting is
    obeyed.
    """
    home, own = dagster_home()
    from dagster import DagsterInstance, DagsterInvalidConfigError

    from kebab_eval_pipeline.cli import instance_config

    config = home / "dagster.yaml"
    # Dagster creates its SQLite tables on first use without a lock: several commands starting at
    # once on a new home can corrupt the schema version for good, so creation is serialised here.
    with atomic.locked(config):
        if not config.exists() or (own and config.read_text(encoding="utf-8").strip() in _OLD_OWN_CONFIGS):
            atomic.write_text(config, TELEMETRY_OFF)
        # A dagster.yaml Dagster cannot use is the user's to fix (exit 2, file, line, key, remedy),
        # not an internal failure: read it first, then name what Dagster refuses in it.
        problems = instance_config.read_problems(config)
        if problems:
            raise InputError(instance_config.SUMMARY, problems)
        try:
            added = _cli_settings(config)
            if not added:
                instance = DagsterInstance.get()
            else:
                _write_telemetry_off_copy(config, home / TELEMETRY_OFF_COPY, added)
                instance = DagsterInstance.from_config(str(home), config_filename=TELEMETRY_OFF_COPY)
        except DagsterInvalidConfigError as exc:
            raise instance_config.config_error(config, exc) from None
        except Exception as exc:
            if not instance_config.is_class_failure(exc):
                raise
            raise instance_config.class_error(config, exc) from None
        try:
            # Loaded lazily by Dagster, so a module that cannot be imported failed a run midway;
            # every run of the CLI needs it, so it is loaded (and named when it fails) here.
            instance.run_coordinator  # noqa: B018
        except Exception as exc:
            if not instance_config.is_class_failure(exc):
                raise
            raise instance_config.class_error(config, exc) from None
        return instance


#: What the CLI's own runs use when the user's dagster.yaml does not say: no telemetry, and no
#: capture of each step's stdout/stderr into files (Dagster's default compute-log manager starts a
#: ``tail`` and a watcher process per step — a fixed cost on every step, and a ``tail`` that inherits
#: an ignored SIGTERM would hold the step 30 s). The CLI's steps print nothing worth keeping: the
#: run's events and the terminal carry everything, as with Dagster's in-process execution.
CLI_DEFAULTS = {
    "telemetry": {"enabled": False},
    "compute_logs": {
        "module": "dagster.core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    },
}


def _write_telemetry_off_copy(config: Path, copy: Path, added: dict) -> None:
    """``config``'s settings (a mapping, or empty) plus ``added`` (the :data:`CLI_DEFAULTS` it does
    not set), written to ``copy`` (rewritten on every open, so an edit of ``config`` is followed)."""
    import yaml

    doc = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    text = yaml.safe_dump({**doc, **added}, sort_keys=False)
    if not copy.exists() or copy.read_text(encoding="utf-8") != text:
        atomic.write_text(copy, text)


def _cli_settings(config: Path) -> dict:
    """The :data:`CLI_DEFAULTS` a dagster.yaml does not set (none for an unreadable one: Dagster
    reports it on load); a user's own ``telemetry`` or ``compute_logs`` setting is obeyed."""
    import yaml

    try:
        doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    if doc is not None and not isinstance(doc, dict):
        return {}
    return {key: value for key, value in CLI_DEFAULTS.items() if key not in (doc or {})}


def open_store(config: Path | None = None, chain: str | None = None, gate: str | None = None) -> RunStore:
    """The run store of ``config``'s ``storage`` (default: beside the Dagster instance) — or, with
    ``chain`` / ``gate`` (``--chain`` / ``--gate``), of the chain or the gate that config belongs
    to (:mod:`.address`) — without opening the instance. When it holds no runs but folders beside
    it do, a note on stderr names them."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.address import address, elsewhere_note
    from kebab_eval_pipeline.store.runs import RunStore

    where = address(chain, gate)
    dagster_home()  # anchors the default storage beside the instance (without opening it)
    configured = load_settings(config).storage
    store = RunStore(where.storage(configured))
    note = elsewhere_note(store, where, configured)
    if note is not None:
        err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    return store


#: Names the package's own code location goes by: ``workspace.yaml`` / ``[tool.dagster]``, and
#: ``dagster dev -m kebab_eval_pipeline[.definitions]``.
OWN_LOCATIONS = frozenset({"kebab_eval_pipeline", "kebab_eval_pipeline.definitions"})
#: Runs of the instance read for the test below (newest first): enough to see a workspace's.
RECENT_RUNS = 500


def foreign_locations(instance) -> list[str]:
    """The code locations the instance's recent runs were launched from (by the UI, a schedule or
    a sensor), when none of them is this package's own location — a team's instance whose
    workspace does not hold it; [] when one is, or when no run came from a code location (an
    instance only the CLI used, or a new one). The package's location is known by its names,
    its jobs (``evaluation_run``, ``register_sweep``) or its unprefixed assets."""
    from kebab_eval_pipeline.orchestration.factory import JOB_NAME
    from kebab_eval_pipeline.orchestration.sweep import REGISTER_JOB

    own_jobs = {JOB_NAME, REGISTER_JOB}
    own_keys: set | None = None  # built at the first run that came from a code location
    seen: set[str] = set()
    for run in instance.get_runs(limit=RECENT_RUNS):
        origin = run.remote_job_origin
        if origin is None:  # run in-process (the CLI, tests): says nothing of a workspace
            continue
        if own_keys is None:
            from kebab_eval_pipeline.orchestration.factory import chain_assets
            from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES

            chain = chain_assets(DEFAULT_NAMES)
            own_keys = {key for a in [*chain.source_assets, *chain.eval_assets] for key in a.keys}
        if (
            origin.location_name in OWN_LOCATIONS
            or run.job_name in own_jobs
            or own_keys & set(run.asset_selection or ())
        ):
            return []
        seen.add(origin.location_name)
    return sorted(seen)


def check_own_location(instance, command: str) -> None:
    """Refuse (InputError, exit 2) to add runs of the package's own location to an instance whose
    workspace does not hold it (:func:`foreign_locations`): there they would be runs of a job no
    code location has. The fix is named: ``--chain`` with the chain's config (its runs are that
    workspace's own), or another ``DAGSTER_HOME``."""
    locations = foreign_locations(instance)
    if not locations:
        return
    home = os.environ.get("DAGSTER_HOME", "")
    raise InputError(
        f"DAGSTER_HOME is the instance of a Dagster workspace without this package's code location: "
        f"`kebab-eval {command}` would add runs of its job evaluation_run, which no code location "
        "there has",
        [
            Offender(
                "DAGSTER_HOME",
                f"{home}: its runs come from {', '.join(locations)}. To evaluate a chain of that "
                "workspace, pass --chain NAME and the chain's --config (the runs are then the chain's "
                "own: NAME__evaluation_run, NAME__eval_runs); otherwise use another DAGSTER_HOME "
                "(unset, the CLI keeps its own in .kebab-eval/dagster_home)",
            )
        ],
    )
