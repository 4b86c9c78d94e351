"""Run settings: the run config file as a typed, strict pydantic model (SPEC §12).

Every key is optional; the defaults evaluate the bundled demo golden set with
the built-in reference system. Relative paths resolve against the config
file's folder. Unknown keys are errors (a typo must not silently change a run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
)

from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.foundation.automation_settings import FreshnessSettings, NightlySettings
from kebab_eval_pipeline.foundation.config_model import ENV_NAME_RE, AtKey, StrictSettings
from kebab_eval_pipeline.foundation.config_suggest import suggestion, unknown_key_reason
from kebab_eval_pipeline.foundation.demo import DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.limits import CONFIG_LIMIT_ENV
from kebab_eval_pipeline.foundation.net.secrets import (
    SecretMask,
    ambient_secrets,
    env_secrets,
    remember,
    url_secrets,
)
from kebab_eval_pipeline.foundation.yaml_io import YamlPositions, parse_yaml, quote_it, read_text
from kebab_eval_pipeline.gates.settings import (
    GATED_VERDICTS,
    WFGY_DEFAULT_GATES,
    GateSettings,
    RegressionGateSettings,
    VerdictGateSettings,
)
from kebab_eval_pipeline.golden.source import GoldenSource
from kebab_eval_pipeline.golden_health.settings import GoldenHealthSettings
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.metrics.catalogue import not_measured
from kebab_eval_pipeline.metrics.settings import DEFAULT_KS, MatchCriterion, SystemHealthSettings
from kebab_eval_pipeline.sweep.config import SweepSettings
from kebab_eval_pipeline.sweep.grid import KEY_PATTERN, apply_variant, expand, grid_problems, value_text
from kebab_eval_pipeline.systems.capabilities import run_lacks
from kebab_eval_pipeline.systems.costs import SystemCostSettings
from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings
from kebab_eval_pipeline.systems.settings import SYSTEM_KINDS, SystemSettings, kind_of

#: The ``baseline`` setting's named modes; any other value is a run id (see compare/baseline.py).
BASELINE_MODES = ("auto", "previous", "pinned", "none")


DEFAULT_OWNERS = ("team:evaluation",)
#: Queries per shard when the run config does not say (``shard_queries``): the demo and ordinary
#: runs are one shard, so sharding costs them one plan and one merge step, not a step per shard.
DEFAULT_SHARD_QUERIES = 10_000
#: The most repeats a run may ask for (``repeat``): each repeat costs a full pass over the golden set.
MAX_REPEAT = 100
# Dagster's owner rule (checked here so a bad owner is a config error naming the line): an e-mail
# address, or "team:" and a name.
OWNER_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+|team:\S.*")


class RunSettings(StrictSettings):
    """Everything that defines one evaluation run, minus its run id."""

    golden: str | GoldenSource | None = None  # a file or folder, or a mapping (golden/source.py)
    system: SystemSettings = Field(default_factory=ReferenceSystemSettings)  # type: ignore[assignment]
    k: list[Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=lambda: list(DEFAULT_KS))
    mrr_cutoff: Annotated[int, Field(ge=1, le=1000)] = 10  # also the k asked for: bounded like k
    # A support is relevant from this grade up (trec_eval -l): the binary retrieval measures follow
    # it, nDCG keeps the raw grades (metrics/catalogue.py says which). Grades are 32-bit ints.
    relevance_level: Annotated[int, Field(ge=1, le=2**31 - 1)] = 1
    answers: bool = True
    match: MatchCriterion = "auto"
    stale_golden: Literal["fail", "warn", "off"] = "fail"  # gold references the index does not hold
    # The matching_coverage check (hits that cannot support what the golden set needs, e.g. no line
    # ranges or basenames for paths): warn (default, the run goes on) or fail (a blocking check).
    matching_coverage: Literal["warn", "fail"] = "warn"
    # auto | previous | pinned | none | <run_id> (kebab_eval_pipeline.compare.baseline): auto = the
    # baseline pinned for the golden set (`kebab-eval baseline set ID`), else previous = the most
    # recent earlier run on the same golden sha256; pinned = the pin only; none = no comparison.
    baseline: str = "auto"
    source_root: str | None = None
    storage: str | None = None  # artifact base path or fsspec URL; default: under the Dagster instance
    gates: dict[str, GateSettings] = Field(default_factory=dict)
    regression_gates: dict[str, RegressionGateSettings] = Field(default_factory=dict)
    verdict_gates: dict[str, VerdictGateSettings] = Field(default_factory=dict)
    default_gates: bool = True  # the WFGY answer gates, non-blocking, skipped where no answers exist
    compare: CompareSettings = Field(default_factory=CompareSettings)
    # A run whose system under test errored too often fails (exit 1); null = report it, never fail.
    system_health: SystemHealthSettings | None = Field(default_factory=SystemHealthSettings)
    # The LLM judge (SPEC §6): null = off (the default); a mapping turns it on (judge/config.py).
    judge: JudgeSettings | None = None
    # The price table of the system under test's models: its answers' tokens priced like the
    # judge's (systems/costs.py); null = only the costs the system reports itself.
    system_costs: SystemCostSettings | None = None
    # Queries per shard of retrieval_results and judge: each shard is a Dagster step of its own, so
    # the multiprocess (or another) executor spreads one run's calls over its workers. The default
    # keeps the demo and ordinary runs in one shard.
    shard_queries: Annotated[int, Field(ge=1, le=10_000_000)] = DEFAULT_SHARD_QUERIES
    # How many times each query is asked within the run (1..MAX_REPEAT): a nondeterministic system
    # (sampling, approximate search) answers differently; every repeat is stored, the headline is
    # the mean over repeats and the run reports its noise floor and flaky queries (metrics/repeats.py).
    # `auto`: ask again until the standard error of each gated metric is at most `repeat_target` of
    # its gate's margin, from 3 repeats to `repeat_max`; a deterministic system stops at 3
    # (chain/auto_repeat.py; the run's retrieval is then one shard).
    repeat: Annotated[int, Field(ge=1, le=MAX_REPEAT)] | Literal["auto"] = 1
    # With `repeat: auto`: the most repeats (3..MAX_REPEAT).
    repeat_max: Annotated[int, Field(ge=3, le=MAX_REPEAT)] = 10
    # With `repeat: auto`: the target standard error of a gated metric, as a fraction of its regression
    # gate's margin (max_drop, non_inferior or equivalent); without a margin the target is 0.01.
    repeat_target: Annotated[float, Field(gt=0.0, le=1.0)] = 0.25
    # The golden-set health check (`golden_health` asset, `kebab-eval golden health`): thresholds.
    golden_health: GoldenHealthSettings = Field(default_factory=GoldenHealthSettings)
    # Shown on every asset in the Dagster UI: e-mail addresses or team:NAME.
    owners: list[str] = Field(default_factory=lambda: list(DEFAULT_OWNERS))
    # The nightly schedule's cron and time zone, and the freshness check's limit (automation_settings.py).
    nightly: NightlySettings = Field(default_factory=NightlySettings)
    freshness: FreshnessSettings = Field(default_factory=FreshnessSettings)
    # A grid of settings to try, each combination a run of its own (sweep/): null = no sweep.
    sweep: SweepSettings | None = None
    # Environment variables holding credentials the system under test reads itself (a command's
    # or a python factory's API key): their values are masked wherever the tool keeps, prints or
    # writes text, like the http headers' and the judge's keys (net/secrets.py).
    secrets_from_env: list[str] = Field(default_factory=list)

    @field_validator("secrets_from_env")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not ENV_NAME_RE.fullmatch(n)]
        if bad:
            raise ValueError(
                f"{', '.join(map(repr, bad))}: expected environment variable names "
                "(the secret itself never goes in the file)"
            )
        return names

    def secret_mask(self, env: Mapping[str, str] | None = None) -> SecretMask:
        """Every secret this run uses, read from ``env`` (default: this process's environment):
        the http system's ``headers_from_env`` values and the credentials in its URLs, the judge's
        API keys (the spot-check judge's too) and the credentials in their base URLs, the values of
        ``secrets_from_env``, credentials in a ``storage`` URL, and the environment's variables named
        like credentials whose values look like keys (net/secrets.py)."""
        # configured first (a short one is warned about), then the environment's credential-named
        # variables that look like keys: a command or python system may read one unannounced
        found = env_secrets(self.secrets_from_env, env)
        found += kind_of(self.system.kind).secrets(self.system, env)  # an http system's headers and URLs
        if self.judge is not None:
            for where, judge in (("judge", self.judge), ("judge.spot_check", self.judge.spot_check_judge())):
                if judge.api_key_env:
                    found += env_secrets([judge.api_key_env], env)
                found += url_secrets(judge.base_url, f"{where}.base_url")
        found += url_secrets(self.storage, "storage")
        return SecretMask.of(found + ambient_secrets(env))

    @field_validator("owners")
    @classmethod
    def _email_or_team(cls, owners: list[str]) -> list[str]:
        bad = [o for o in owners if not OWNER_RE.fullmatch(o)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: an owner is an e-mail address or team:NAME")
        return owners

    @field_validator("repeat", mode="before")
    @classmethod
    def _repeat_is_a_count(cls, value: Any) -> Any:
        # Only a whole number or `auto`: `true` or "3" or 2.5 would otherwise be read as a count.
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(
                f"{value!r} is not a number of repeats: give an integer from 1 to {MAX_REPEAT}, or auto"
            )
        if not 1 <= value <= MAX_REPEAT:
            raise ValueError(f"{value} repeats: give an integer from 1 to {MAX_REPEAT}, or auto")
        return value

    @field_validator("repeat_max", mode="before")
    @classmethod
    def _repeat_max_is_a_count(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a number of repeats: give an integer from 3 to {MAX_REPEAT}")
        return value

    @field_validator("relevance_level", mode="before")
    @classmethod
    def _level_is_a_grade(cls, value: Any) -> Any:
        # Only a whole number: `true` or "2" would otherwise be read as a level.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(
                f"{value!r} is not a grade: give an integer ≥ 1 "
                "(a support is relevant from this grade up, as trec_eval -l)"
            )
        return value

    @field_validator("baseline")
    @classmethod
    def _baseline_mode_or_run_id(cls, value: str) -> str:
        if value in BASELINE_MODES:
            return value
        # Imported here: storage pulls in pandas/pyarrow, and only an explicit run id needs it.
        from kebab_eval_pipeline.foundation.run_ids import check_run_id

        try:
            check_run_id(value)
        except InputError:
            raise ValueError(
                f"{value!r} is neither {', '.join(BASELINE_MODES)} nor a valid run id "
                "(letters, digits, '.', '_' or '-'; max 128; no '..')"
            ) from None
        return value

    @field_validator("golden")
    @classmethod
    def _golden_not_empty(cls, value: str | GoldenSource | None) -> str | GoldenSource | None:
        if isinstance(value, str) and not value.strip():  # "" would silently evaluate the bundled demo
            raise ValueError("empty: give a golden file or folder (or leave the key out for the demo)")
        return value

    @field_validator("storage")
    @classmethod
    def _usable_storage(cls, value: str | None) -> str | None:
        if value is None:  # the default: nothing to check, and nothing to import
            return value
        # Imported here: storage pulls in pandas/pyarrow. A relative path is checked once resolved.
        from kebab_eval_pipeline.foundation.location import storage_problem

        problem = storage_problem(value)
        if problem is not None:  # memory://, http://, /dev/null, foo://: refused before any run
            raise ValueError(problem)
        return value

    @field_validator("source_root")
    @classmethod
    def _local_source_root(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("empty: give the folder the hits' files are read from (or leave the key out)")
        if "://" in value:  # hits are verified against files on this machine
            raise ValueError(
                f"{value.split('://', 1)[0]}:// is not supported: source_root is a local folder "
                "(write file:// URLs as plain paths)"
            )
        return value

    @field_validator("k")
    @classmethod
    def _sorted_unique(cls, ks: list[int]) -> list[int]:
        if not ks:
            raise ValueError("k needs at least one value")
        return sorted(set(ks))

    def golden_path(self) -> Path:
        """The golden file or folder (a mapping's ``path``, else its ``qrels``)."""
        if isinstance(self.golden, GoldenSource):
            return self.golden.paths()[-1]
        return Path(self.golden) if self.golden else DEMO_GOLDEN

    def golden_input(self) -> tuple[list[Path], str, Any]:
        """``(paths, format, dataset options)`` to load the golden set with (``load_golden``)."""
        if isinstance(self.golden, GoldenSource):
            return self.golden.paths(), self.golden.format, self.golden.options()
        return [self.golden_path()], "auto", None

    def run_lacks(self) -> dict[str, str]:
        """What a run of this config cannot carry, as far as the config tells (capability →
        reason): what the system's kind declares (``SystemKind.capabilities``), and answers when
        ``answers`` is false. The built system may lack more (``systems.protocol.system_capabilities``)."""
        return run_lacks(kind_of(self.system.kind).capabilities(self.system), self.answers)

    def effective_gates(self, lacks: Mapping[str, str] | None = None) -> dict[str, GateSettings]:
        """Configured gates plus, unless disabled, the WFGY defaults for metrics not configured —
        but not on a metric a run lacking ``lacks`` cannot measure (default: :meth:`run_lacks`): a
        default gate that cannot run is left out, not listed as skipped."""
        gates = dict(self.gates)
        if self.default_gates:
            lacks = self.run_lacks() if lacks is None else lacks
            for name, gate in WFGY_DEFAULT_GATES.items():
                if name not in gates and not not_measured([name], lacks):
                    gates[name] = gate
        return gates


def _verdict_key(key: object) -> bool:
    return isinstance(key, str) and key.split("[", 1)[0].strip() in GATED_VERDICTS


class _DocumentError(ValueError):
    """A problem found before validation, at ``loc`` (mapping keys from the top)."""

    def __init__(self, loc: list[str], reason: str):
        super().__init__(reason)
        self.loc = loc


def _mapping_or_none(doc: dict, *loc: str) -> dict:
    value: Any = doc
    for key in loc:
        value = value.get(key) if isinstance(value, dict) else None
    if value is not None and not isinstance(value, dict):
        raise _DocumentError(list(loc), f"expected a mapping, got {type(value).__name__}")
    return value or {}


def _normalise_document(doc: dict) -> dict:
    """Accept SPEC §12's two spellings: ``k``/``answers`` under ``system`` and ``gates.regression``."""
    doc = dict(doc)
    system = doc.get("system")
    if isinstance(system, dict):
        system = dict(system)
        for key in ("k", "answers"):
            if key in system:
                if key in doc:
                    raise _DocumentError(
                        ["system", key], f"'{key}' is set both at top level and under 'system'"
                    )
                doc[key] = system.pop(key)
        doc["system"] = system
    gates = doc.get("gates")
    if isinstance(gates, dict) and "regression" in gates:
        # Merged into other keys below: each part must be a mapping (validation would not see them).
        regression = dict(_mapping_or_none(doc, "gates", "regression"))
        previous = {key: _mapping_or_none(doc, key) for key in ("regression_gates", "verdict_gates")}
        gates = dict(gates)
        del gates["regression"]
        # Keys naming a verdict (``regression[tag=critical]``) bound per-query verdicts, not a metric.
        verdicts = {k: regression.pop(k) for k in list(regression) if _verdict_key(k)}
        doc["regression_gates"] = {**previous["regression_gates"], **regression}
        doc["verdict_gates"] = {**previous["verdict_gates"], **verdicts}
        doc["gates"] = gates
    return doc


def _offender(source: str, positions: YamlPositions | None, loc: list, reason: str) -> Offender:
    """One config problem at ``loc``, with the line it starts on when the file's text is known."""
    line = positions.line_of(list(loc)) if positions else None
    field = ".".join(str(p) for p in loc) or None
    return Offender(source, reason, position=f"line {line}" if line else None, field=field)


def _resolve_relative(
    settings: RunSettings, base: Path, source: str = "<config>", text: str | None = None
) -> RunSettings:
    """Make path-valued settings absolute against the config file's folder (URLs untouched)."""
    problems: list[Offender] = []
    positions = YamlPositions(text) if text else None  # composed only if a path is bad

    def fix(value: str | None, *loc: str) -> str | None:
        if value is None or "://" in value:
            return value
        try:
            path = Path(value).expanduser()
            return str(path if path.is_absolute() else (base / path).resolve())
        except (RuntimeError, ValueError, OSError) as exc:  # "~nobody/x" (no such user), a NUL byte
            problems.append(_offender(source, positions, list(loc), f"not a usable path: {exc}"))
            return value

    system = kind_of(settings.system.kind).resolve_paths(settings.system, fix)  # its own path settings
    judge = settings.judge
    if judge is not None:
        update = {"cache_dir": fix(judge.cache_dir, "judge", "cache_dir")}
        if judge.backend == "local" and judge.model:  # a path; an endpoint's model is a name
            update["model"] = fix(judge.model, "judge", "model")
        if judge.calibration is not None:
            labels = fix(judge.calibration.labels, "judge", "calibration", "labels")
            update["calibration"] = judge.calibration.model_copy(update={"labels": labels})
        judge = judge.model_copy(update=update)
    sweep = settings.sweep
    if sweep is not None:  # path values of the grid, as the same keys outside it
        grid = {
            key: [fix(v, "sweep", "grid", key) if isinstance(v, str) else v for v in values]
            if key in SWEPT_PATHS and isinstance(values, list)
            else values
            for key, values in sweep.grid.items()
        }
        sweep = sweep.model_copy(update={"grid": grid})
    health = settings.golden_health
    if health.corpus is not None:
        health = health.model_copy(update={"corpus": fix(health.corpus, "golden_health", "corpus")})
    resolved = settings.model_copy(
        update={
            "sweep": sweep,
            "golden_health": health,
            "judge": judge,
            "golden": (
                settings.golden.model_copy(
                    update={
                        name: fix(getattr(settings.golden, name), "golden", name)
                        for name in ("path", "queries", "qrels")
                    }
                )
                if isinstance(settings.golden, GoldenSource)
                else fix(settings.golden, "golden")
            ),
            "source_root": fix(settings.source_root, "source_root"),
            "storage": fix(settings.storage, "storage"),
            "system": system,
        }
    )
    if resolved.storage and resolved.storage != settings.storage and not problems:
        # A relative storage path, checked now that it is absolute (the validator skipped it).
        from kebab_eval_pipeline.foundation.location import storage_problem

        problem = storage_problem(resolved.storage)
        if problem is not None:
            problems.append(_offender(source, positions, ["storage"], problem))
    if problems:
        raise InputError("run config is invalid", problems)
    return resolved


def settings_from_dict(doc: dict, source: str = "<config>", text: str | None = None) -> RunSettings:
    """Validate a config mapping; every problem is listed with its position when ``text`` is given."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InputError(
            "run config must be a mapping", [Offender(source, f"top level is a {type(doc).__name__}")]
        )
    positions = YamlPositions(text) if text else None  # composed once, only if there is an error
    try:
        settings = RunSettings.model_validate(_normalise_document(doc))
    except _DocumentError as exc:
        raise InputError("run config is invalid", [_offender(source, positions, exc.loc, str(exc))]) from None
    except ValueError as exc:
        if not isinstance(exc, ValidationError):
            raise InputError("run config is invalid", [Offender(source, str(exc))]) from None
        offenders = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if not (isinstance(p, str) and p in SYSTEM_KINDS)]
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, AtKey):
                loc.append(cause.key)
            # pydantic prefixes our validators' messages with "Value error, ": noise to a user
            msg = err["msg"].removeprefix("Value error, ")
            written = (
                positions.scalar_text(loc)
                if positions and err["type"] == "string_type" and err.get("input") is not None
                else None
            )
            if written is not None:  # `baseline: 010` is 8 to YAML: never a silent other id
                reason = quote_it(err["input"], written)
            elif err["type"] == "extra_forbidden":
                # "did you mean": keys of the model at that place (under system, also k/answers)
                also = ("k", "answers") if loc[:-1] == ["system"] else ()
                reason = unknown_key_reason(RunSettings, err["loc"], also)
            else:
                reason = msg
            offenders.append(_offender(source, positions, loc, reason))
        raise InputError("run config is invalid", offenders) from None
    problems = sweep_problems(settings)
    if problems:
        raise InputError(
            "run config is invalid", [_offender(source, positions, loc, reason) for loc, reason in problems]
        )
    return settings


#: Settings a sweep cannot vary, and why.
NOT_SWEPT = {
    "sweep": "a sweep cannot sweep itself",
    "system": "sweep the system's settings one by one: system.<key>",
    "storage": "every variant is stored in the same place, so the leaderboard can read them all",
    "owners": "owners belong to the assets, not to one run",
    **{
        key: "the asset checks are built once from the config, for every run: set it outside the sweep"
        for key in (
            "gates",
            "regression_gates",
            "verdict_gates",
            "default_gates",
            "system_health",
            "matching_coverage",
        )
    },
}
#: Grid keys whose values are paths: relative ones are resolved against the config file's folder.
SWEPT_PATHS = ("golden", "source_root", "system.corpus", "system.index", "system.path", "system.cwd")


def sweep_problems(settings: RunSettings) -> list[tuple[list[str], str]]:
    """Every problem of ``settings.sweep``'s grid as ``(location, reason)``, the location
    ``sweep.grid.<key>`` (or ``sweep.grid`` for the whole grid or a combination): its shape
    (:func:`~kebab_eval_pipeline.sweep.grid.grid_problems`), keys that are no setting of the run or
    of its system kind or cannot vary per run (:data:`NOT_SWEPT`), then — only when those are fine
    — every variant's full settings validated, each distinct problem once. Empty without a sweep."""
    sweep = settings.sweep
    if sweep is None:
        return []
    grid = sweep.grid
    out = [(["sweep", "grid", *([key] if key else [])], reason) for key, reason in grid_problems(grid)]
    shape = len(out)
    system_model = type(settings.system)
    for key in grid:
        if not isinstance(key, str):
            continue  # reported by grid_problems
        top, _, name = key.rpartition(".")
        if top == "system":
            if name == "kind":
                reason = (
                    "the system kind cannot be swept (each kind has its own settings): one sweep per kind"
                )
            elif name not in system_model.model_fields:
                near = suggestion(name, system_model.model_fields)
                reason = f"not a setting of a {settings.system.kind} system" + (
                    f" — did you mean 'system.{near}'?" if near else ""
                )
            else:
                continue
        elif top:
            continue  # not a key grid_problems accepts
        elif key in NOT_SWEPT:
            reason = f"cannot be swept: {NOT_SWEPT[key]}"
        elif key not in RunSettings.model_fields:
            near = suggestion(key, [k for k in RunSettings.model_fields if k not in NOT_SWEPT])
            reason = "not a run setting" + (f" — did you mean '{near}'?" if near else "")
        else:
            continue
        out.append((["sweep", "grid", key], reason))
    base = settings.model_dump(exclude_unset=True)
    base.pop("sweep", None)
    base["system"] = {"kind": settings.system.kind, **base.get("system", {})}

    def problems_of(overrides: dict[str, Any], label: str) -> list[tuple[list[str], str]]:
        try:
            RunSettings.model_validate(_normalise_document(apply_variant(base, overrides)))
        except ValidationError as exc:
            found = []
            for err in exc.errors():
                loc = [str(p) for p in err["loc"] if not (isinstance(p, str) and p in SYSTEM_KINDS)]
                msg = err["msg"].removeprefix("Value error, ")
                key = next((k for k in (".".join(loc[:2]), loc[0] if loc else "") if k in overrides), None)
                if len(overrides) == 1 or key is not None:  # one value, or the error is at its key
                    key = key or next(iter(overrides))
                    where = "" if key in (".".join(loc[:2]), loc[0]) else f"{'.'.join(loc)}: "
                    found.append((["sweep", "grid", key], f"{value_text(overrides[key])}: {where}{msg}"))
                else:  # a combination (chunk_overlap ≥ chunk_size)
                    found.append(
                        (["sweep", "grid"], f"variant {label}: {'.'.join(loc) or 'settings'}: {msg}")
                    )
            return found
        return []

    # Each value alone (the other settings as configured): every wrong value is named, whatever
    # else is wrong; then, only when each value is fine alone, every combination.
    bad = {key for loc, _ in out[shape:] for key in loc[2:3]}  # keys that are no setting
    for key, values in grid.items():
        if (
            key in bad
            or not isinstance(key, str)
            or not KEY_PATTERN.fullmatch(key)
            or not isinstance(values, list)
        ):
            continue
        for value in values:
            out += [p for p in problems_of({key: value}, key) if p not in out]
    if out:
        return out
    for variant in expand(sweep.name, grid):
        out += [p for p in problems_of(variant.overrides, variant.label()) if p not in out]
    return out


def load_settings(path: str | Path | None, replace: dict | None = None) -> RunSettings:
    """Load run settings from a YAML file; ``None`` gives the defaults (the embedded demo).

    ``replace`` maps top-level config keys to values that replace the file's (how a chain built in
    Python, :func:`~kebab_eval_pipeline.orchestration.factory.evaluation_chain`, sets its ``system``,
    ``golden`` or ``gates``); they are validated as if written in the file, and their relative paths
    are resolved against the file's folder (the working directory without a file).

    The file is refused before parsing when larger than ``KEBAB_EVAL_MAX_CONFIG_MB`` (default
    4 MiB); YAML is read with a safe loader (no Python object tags) that refuses alias bombs.
    """
    if path is None:
        if not replace:
            return RunSettings()
        settings = settings_from_dict(dict(replace), source="<evaluation_chain settings>")
        return _remembered(_resolve_relative(settings, Path.cwd(), "<evaluation_chain settings>"))
    path = Path(path)
    text = read_text(path, "run config", CONFIG_LIMIT_ENV)  # bounded by KEBAB_EVAL_MAX_CONFIG_MB
    doc = parse_yaml(text, path, "run config")
    blank = _blank_destinations(doc, text)
    if blank:
        positions = YamlPositions(text)
        raise InputError(
            "run config is invalid",
            [
                _offender(str(path), positions, [key], "no value: give one, or write null for the default")
                for key in blank
            ],
        )
    if replace:
        doc = {**(doc or {}), **replace}
        source = f"{path} (with evaluation_chain settings: {', '.join(sorted(replace))})"
        settings = settings_from_dict(doc, source=source)
        return _remembered(_resolve_relative(settings, path.resolve().parent, source))
    settings = settings_from_dict(doc, source=str(path), text=text)
    return _remembered(_resolve_relative(settings, path.resolve().parent, str(path), text))


def _remembered(settings: RunSettings) -> RunSettings:
    """``settings``, its secrets added to what this process masks in all it prints and writes."""
    remember(settings.secret_mask())
    return settings


#: Keys whose default is somewhere else (the bundled demo, the instance's folder): written with no
#: value at all (``storage:`` — often a template whose variable was empty) they are refused, not
#: read as null; ``storage: null`` still means the default.
BLANK_REFUSED = ("golden", "storage", "source_root")


def _blank_destinations(doc: Any, text: str) -> list[str]:
    if not isinstance(doc, dict):
        return []
    return [
        key
        for key in BLANK_REFUSED
        if key in doc and doc[key] is None and re.search(rf"^{key}:[ \t]*(#.*)?$", text, re.MULTILINE)
    ]
