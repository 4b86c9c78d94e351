"""Run settings: the YAML file of SPEC §12 as a typed, strict pydantic model.

Every key is optional; the defaults evaluate the bundled demo golden set with
the built-in reference system. Relative paths resolve against the config
file's folder. Unknown keys are errors (a typo must not silently change a run).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from kebab_eval_pipeline.config_suggest import unknown_key_reason
from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.http_checks import header_name_problem, header_value_problem, url_problem
from kebab_eval_pipeline.judge.config import JudgeSettings, Seed
from kebab_eval_pipeline.limits import CONFIG_ENV
from kebab_eval_pipeline.systems.wire import ResponseMap
from kebab_eval_pipeline.yaml_io import YamlPositions, parse_yaml, read_text

DEMO_DIR = Path(__file__).parent / "data" / "demo"
DEMO_GOLDEN = DEMO_DIR / "golden.yaml"
DEMO_CORPUS = DEMO_DIR / "corpus"

MatchCriterion = Literal["auto", "chunk", "doc", "anchor", "span", "fields"]
#: The ``baseline`` setting's named modes; any other value is a run id (see compare/baseline.py).
BASELINE_MODES = ("auto", "previous", "pinned", "none")
DEFAULT_KS = (1, 3, 5, 10)
#: Upper bound of the count settings (query counts): every int setting is bounded, so none can
#: overflow a 64-bit column or JSON writer after the run (an unbounded int failed only when stored).
MAX_COUNT = 1_000_000_000


#: ``system.name``: when set, runs of the same kind and name are one system for baseline choice,
#: whatever their argv, URL, corpus or mode (kebab_eval_pipeline/system_identity.py).
SystemName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]

DEFAULT_OWNERS = ("team:evaluation",)
# Dagster's owner rule (checked here so a bad owner is a config error naming the line): an e-mail
# address, or "team:" and a name.
OWNER_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+|team:\S.*")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # a NaN gate never passes


class AtKey(ValueError):
    """A validator's error about one key of a mapping field: the offender's field (and line) is
    that key's, e.g. ``system.headers.X-Trace`` rather than ``system.headers``."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key = key


class ReferenceSystemSettings(_Strict):
    """The built-in reference RAG system (SPEC §4.1)."""

    kind: Literal["reference"] = "reference"
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    corpus: str | None = None  # folder to index; default: the bundled demo corpus
    index: str | None = None  # a prebuilt index folder (``kebab-eval ref index``) instead of a corpus
    chunk_size: Annotated[int, Field(ge=50, le=100_000)] = 800
    chunk_overlap: Annotated[int, Field(ge=0, le=100_000)] = 0
    exclude: tuple[str, ...] = ()  # .gitignore-style patterns, relative to the corpus folder
    mode: Literal["lexical", "vector", "hybrid"] = "lexical"
    refusal_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ReferenceSystemSettings:
        if self.corpus and self.index:
            raise ValueError("set either 'corpus' or 'index', not both")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self


PLACEHOLDER_RE = re.compile(r"\{(query|query_id|k|mode)\}")  # the only substitutions, done in one pass
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _templates_need_mode(*templates: object) -> bool:
    def walk(value: object) -> bool:
        if isinstance(value, str):
            return "{mode}" in value
        if isinstance(value, dict):
            return any(walk(v) for v in value.values())
        if isinstance(value, list | tuple):
            return any(walk(v) for v in value)
        return False

    return any(walk(t) for t in templates)


#: The default cap on one response of a command or http system (``system.max_response_mb``): far
#: above a real response (1,000 hits with 2 KB snippets and an answer are about 3 MB of JSON),
#: and low enough that ``concurrency`` of them at once cannot exhaust a machine.
DEFAULT_MAX_RESPONSE_MB = 64.0


class CommandSystemSettings(_Strict):
    """An external CLI (SPEC §4 "command"). Arguments are an argv list — never a shell.

    ``protocol: per_query`` (the default) runs ``search_argv`` (and ``ask_argv``) once per query;
    ``{query}``, ``{query_id}``, ``{k}`` and ``{mode}`` are substituted inside each item, so the
    query is always exactly one argument, unchanged. ``ask_returns_hits`` says the ask command's
    JSON carries the hits too: with answers on, one ask process per query, no search process.
    ``protocol: jsonl`` starts ``argv`` once per worker (``concurrency``) and speaks JSON lines
    over its stdin/stdout (systems/command_jsonl.py): ``{mode}`` is the only placeholder there.
    """

    kind: Literal["command"]
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    protocol: Literal["per_query", "jsonl"] = "per_query"
    search_argv: Annotated[list[str], Field(min_length=1)] | None = None  # per_query: required
    ask_argv: Annotated[list[str], Field(min_length=1)] | None = None  # per_query: needed for answers
    ask_returns_hits: bool = False  # per_query: the ask output carries the hits; no search call then
    argv: Annotated[list[str], Field(min_length=1)] | None = None  # jsonl: the long-lived process
    version_argv: Annotated[list[str], Field(min_length=1)] | None = None  # prints versions (JSON or text)
    mode: str | None = None  # substituted for {mode}; sent as "mode" in jsonl requests
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0  # per query
    # Default 2 per-query processes, 1 long-lived process (filled in by _protocol_defaults).
    concurrency: Annotated[int, Field(ge=1, le=64)] = 2
    startup_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # jsonl: start to first reply
    max_restarts: Annotated[int, Field(ge=0, le=1000)] = 3  # jsonl: consecutive crashes restarted
    cwd: str | None = None
    # One response (per_query: a process's stdout; jsonl: one reply line), checked while reading.
    max_response_mb: Annotated[float, Field(gt=0, le=4096)] = DEFAULT_MAX_RESPONSE_MB
    response: ResponseMap = Field(default_factory=ResponseMap)

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and "concurrency" not in data and data.get("protocol") == "jsonl":
            return {**data, "concurrency": 1}  # one long-lived process unless asked for more
        return data

    @model_validator(mode="after")
    def _argvs_fit_the_protocol(self) -> CommandSystemSettings:
        if self.protocol == "per_query":
            if self.search_argv is None:
                raise ValueError("system.search_argv is required (protocol per_query runs it once per query)")
            if self.argv is not None:
                raise ValueError("system.argv is for protocol: jsonl; per_query uses search_argv / ask_argv")
            if self.ask_returns_hits and self.ask_argv is None:
                raise ValueError("system.ask_returns_hits needs ask_argv")
            jsonl_only = sorted({"startup_timeout_s", "max_restarts"} & self.model_fields_set)
            if jsonl_only:  # set but without effect: say so rather than ignore it
                raise ValueError(
                    f"{', '.join('system.' + n for n in jsonl_only)}: only used by protocol jsonl "
                    "(per_query starts a new process for every call)"
                )
        else:
            if self.argv is None:
                raise ValueError(
                    "system.argv is required (protocol jsonl starts it once and talks JSON lines)"
                )
            unused = [n for n in ("search_argv", "ask_argv") if getattr(self, n) is not None]
            if self.ask_returns_hits:
                unused.append("ask_returns_hits")
            if unused:
                raise ValueError(
                    f"{', '.join('system.' + n for n in unused)}: not used by protocol jsonl "
                    "(one argv; each reply carries the hits and, when asked, the answer)"
                )
            per_query = sorted(
                {m.group(1) for item in self.argv for m in PLACEHOLDER_RE.finditer(item)} - {"mode"}
            )
            if per_query:
                raise ValueError(
                    f"system.argv: {', '.join('{' + p + '}' for p in per_query)} cannot be substituted in a "
                    "process that serves every query; they are fields of each JSON request"
                )
        if self.mode is None and _templates_need_mode(
            self.search_argv, self.ask_argv, self.version_argv, self.argv
        ):
            raise ValueError("an argv uses {mode}; set system.mode")
        return self


_CREDENTIAL_HEADER_RE = re.compile(r"auth|cookie|token|secret|passw|api[-_]?key|credential|signature", re.I)


class HttpSystemSettings(_Strict):
    """A search/ask HTTP service (SPEC §4 "http"): JSON POSTs with a templated body, retries with
    exponential backoff on connection errors, 429 and 5xx, bounded concurrency. Header values
    come from environment variables named here; they are never logged or stored."""

    kind: Literal["http"]
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    search_url: str
    ask_url: str | None = None  # needed for answers
    version_url: str | None = None  # GET → JSON of versions
    mode: str | None = None  # substituted for {mode}
    search_request: dict[str, Any] = Field(default_factory=lambda: {"query": "{query}", "k": "{k}"})
    ask_request: dict[str, Any] = Field(default_factory=lambda: {"query": "{query}", "k": "{k}"})
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    backoff_s: Annotated[float, Field(ge=0, le=60)] = 0.25  # first retry's delay; doubles each time
    max_backoff_s: Annotated[float, Field(ge=0, le=600)] = 10.0  # also caps a server's Retry-After
    concurrency: Annotated[int, Field(ge=1, le=256)] = 4
    headers: dict[str, str] = Field(default_factory=dict)  # non-secret headers, stored as given
    headers_from_env: dict[str, str] = Field(
        default_factory=dict
    )  # header → env var name (or "Bearer ${VAR}")
    # One response body, decompressed size counted, checked while it arrives.
    max_response_mb: Annotated[float, Field(gt=0, le=4096)] = DEFAULT_MAX_RESPONSE_MB
    response: ResponseMap = Field(default_factory=ResponseMap)

    @field_validator("search_url", "ask_url", "version_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else url_problem(url)
        if problem is not None:  # port 99999, "http://[::1/x", no host: refused here, not per query
            raise ValueError(problem)
        return url

    @field_validator("headers", "headers_from_env", mode="before")
    @classmethod
    def _header_names(cls, headers: Any) -> Any:
        # A name with a space, CR/LF or NUL would fail every request as a `connection` error.
        if isinstance(headers, dict):
            for name in headers:
                problem = header_name_problem(name) if isinstance(name, str) else None
                if problem is not None:
                    raise AtKey(name, problem)
        return headers

    @field_validator("headers")
    @classmethod
    def _header_values(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            problem = header_value_problem(value)
            if problem is not None:  # CR/LF would inject a header; the value itself is never quoted
                raise AtKey(name, problem)
        return headers

    @field_validator("headers")
    @classmethod
    def _no_credentials_inline(cls, headers: dict[str, str]) -> dict[str, str]:
        # Literal headers are stored in config snapshots and shown in the UI: a credential must come
        # from the environment instead (Dagster's EnvVar rule, applied to the config file).
        named = [h for h in headers if _CREDENTIAL_HEADER_RE.search(h)]
        if named:
            raise ValueError(
                f"{', '.join(named)}: credentials cannot be written in the config file; "
                "name an environment variable under headers_from_env instead"
            )
        return headers

    @field_validator("headers_from_env")
    @classmethod
    def _env_refs(cls, refs: dict[str, str]) -> dict[str, str]:
        for header, ref in refs.items():
            if not (_ENV_NAME_RE.fullmatch(ref) or re.search(r"\$\{?[A-Za-z_][A-Za-z0-9_]*", ref)):
                raise ValueError(
                    f"{header}: expected an environment variable name (or a template like 'Bearer ${{NAME}}')"
                )
        return refs

    @model_validator(mode="after")
    def _mode_if_used(self) -> HttpSystemSettings:
        if self.mode is None and _templates_need_mode(self.search_request, self.ask_request):
            raise ValueError("a request template uses {mode}; set system.mode")
        return self


class ReplaySystemSettings(_Strict):
    """Recorded traces instead of a live system (SPEC §4 "replay")."""

    kind: Literal["replay"]
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    path: str  # a trace file (JSONL / JSON)
    format: Literal["auto", "kebab", "wfgy", "export"] = "auto"
    # each line's recorded hits / answer in a framework's own shape: only the field mappings apply
    response: ResponseMap = Field(default_factory=ResponseMap)

    @field_validator("response")
    @classmethod
    def _fields_only(cls, response: ResponseMap) -> ResponseMap:
        placed = [name for name in ("hits", "answer", "scope") if getattr(response, name) is not None]
        if placed:
            raise ValueError(
                f"{', '.join(placed)}: a trace line keeps them under its own keys; "
                "replay takes only hit_fields, answer_fields and citation_fields"
            )
        return response


def _system_kind(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("kind", "reference")
    return getattr(value, "kind", "reference")


SystemSettings = Annotated[
    Annotated[ReferenceSystemSettings, Tag("reference")]
    | Annotated[CommandSystemSettings, Tag("command")]
    | Annotated[HttpSystemSettings, Tag("http")]
    | Annotated[ReplaySystemSettings, Tag("replay")],
    Discriminator(
        _system_kind,
        custom_error_type="system_kind",
        custom_error_message="system.kind must be one of reference, command, http, replay",
    ),
]
SYSTEM_KINDS = ("reference", "command", "http", "replay")


class GateSettings(_Strict):
    """An absolute threshold on one metric (SPEC §7), keyed by the metric's name — or by
    ``metric[dimension=value]`` for one breakdown slice, e.g. ``mrr[lang=ko]``, ``hit@5[tag=critical]``.
    ``skip_if_null``: pass (as skipped) instead of failing when the value is null."""

    min: float | None = None
    max: float | None = None
    blocking: bool = True
    skip_if_null: bool = False

    @model_validator(mode="after")
    def _has_bound(self) -> GateSettings:
        if self.min is None and self.max is None:
            raise ValueError("a gate needs 'min' or 'max'")
        return self


class RegressionGateSettings(_Strict):
    """A tolerance against the baseline run (SPEC §7): the metric may not get worse by more than
    ``max_drop``, and/or may not get worse with a paired-test p-value below ``max_p`` ("worse" is
    lower, or higher for rates of bad events and latencies: the metric catalogue's direction). With
    neither set, any worsening fails (``max_drop: 0``)."""

    max_drop: Annotated[float, Field(ge=0.0)] | None = None
    max_p: Annotated[float, Field(gt=0.0, lt=1.0)] | None = None
    blocking: bool = True
    skip_if_null: bool = False  # pass (as skipped) when either run's value or the p-value is null

    @model_validator(mode="before")
    @classmethod
    def _default_drop(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("max_drop") is None and data.get("max_p") is None:
            return {**data, "max_drop": 0.0}
        return data


#: Per-query verdicts a gate can bound (``gates.regression``: ``regression[tag=critical]: {max: 0}``).
GATED_VERDICTS = ("regression", "loss")


class VerdictGateSettings(_Strict):
    """A bound on how many queries of the comparison may get a verdict (SPEC §7/§8), keyed by the
    verdict — ``regression`` or ``loss`` — optionally restricted to one slice of queries:
    ``regression[tag=critical]``, ``loss[category=multi_hop]``. ``max`` defaults to 0: any
    such verdict fails."""

    max: Annotated[int, Field(ge=0, le=MAX_COUNT)] = 0
    blocking: bool = True


class CompareSettings(_Strict):
    """How comparisons (SPEC §8) test and warn: the paired tests' ``seed`` and ``resamples``,
    ``min_queries`` below which the report warns that nothing can be concluded, and
    ``strict_chunker_version`` to refuse comparing runs whose chunkers differ."""

    seed: Seed = 0
    resamples: Annotated[int, Field(ge=100, le=1_000_000)] = 10_000
    min_queries: Annotated[int, Field(ge=1, le=MAX_COUNT)] = 30
    strict_chunker_version: bool = False


#: Default ``system_health.max_error_rate``: an errored query scores 0 on every metric that applies to
#: it, so a 10% error rate can move MRR or hit@k by up to 0.1 — more than any regression tolerance a
#: team gates on — while the adapters' retries already absorb transient failures.
DEFAULT_MAX_ERROR_RATE = 0.1


class SystemHealthSettings(_Strict):
    """When a run fails because the system under test failed (checked by the ``system_health``
    asset check on ``run_metrics``): more than ``max_error_rate`` of the queries errored, or every
    query did (whatever the rate, so ``max_error_rate: 1.0`` fails only a dead system).
    ``blocking: false`` (or ``system_health: null``) reports the same verdict as a warning only."""

    max_error_rate: Annotated[float, Field(ge=0.0, le=1.0)] = DEFAULT_MAX_ERROR_RATE
    blocking: bool = True


class RunSettings(_Strict):
    """Everything that defines one evaluation run, minus its run id."""

    golden: str | None = None
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
    # Shown on every asset in the Dagster UI: e-mail addresses or team:NAME.
    owners: list[str] = Field(default_factory=lambda: list(DEFAULT_OWNERS))

    @field_validator("owners")
    @classmethod
    def _email_or_team(cls, owners: list[str]) -> list[str]:
        bad = [o for o in owners if not OWNER_RE.fullmatch(o)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: an owner is an e-mail address or team:NAME")
        return owners

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
        from kebab_eval_pipeline.storage import check_run_id

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
    def _golden_not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():  # "" would silently evaluate the bundled demo
            raise ValueError("empty: give a golden file or folder (or leave the key out for the demo)")
        return value

    @field_validator("storage")
    @classmethod
    def _usable_storage(cls, value: str | None) -> str | None:
        if value is None:  # the default: nothing to check, and nothing to import
            return value
        # Imported here: storage pulls in pandas/pyarrow. A relative path is checked once resolved.
        from kebab_eval_pipeline.storage import storage_problem

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
        return Path(self.golden) if self.golden else DEMO_GOLDEN

    def effective_gates(self) -> dict[str, GateSettings]:
        """Configured gates plus, unless disabled, the WFGY defaults for metrics not configured."""
        gates = dict(self.gates)
        if self.default_gates:
            for name, gate in WFGY_DEFAULT_GATES.items():
                gates.setdefault(name, gate)
        return gates


# SPEC §7: the WFGY answer gates. Warnings by default: they speak only where answers exist.
WFGY_DEFAULT_GATES: dict[str, GateSettings] = {
    "answer_precision": GateSettings(min=0.80, blocking=False, skip_if_null=True),
    "chr": GateSettings(min=0.75, blocking=False, skip_if_null=True),
    "under_refusal_rate": GateSettings(max=0.05, blocking=False, skip_if_null=True),
    "over_refusal_rate": GateSettings(max=0.10, blocking=False, skip_if_null=True),
}


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

    system = settings.system
    if isinstance(system, ReferenceSystemSettings):
        system = system.model_copy(
            update={
                "corpus": fix(system.corpus, "system", "corpus"),
                "index": fix(system.index, "system", "index"),
            }
        )
    elif isinstance(system, CommandSystemSettings):
        # A program given as a relative path ("./bin/search") is relative to the config file,
        # like every other path in it — unless cwd is set, where the process then starts.
        if system.cwd:
            system = system.model_copy(update={"cwd": fix(system.cwd, "system", "cwd")})
        else:
            argvs = {}
            for name in ("search_argv", "ask_argv", "argv", "version_argv"):
                argv = getattr(system, name)
                if argv and "/" in argv[0] and not _is_absolute(argv[0]):
                    argvs[name] = [fix(argv[0], "system", name), *argv[1:]]
            system = system.model_copy(update=argvs)
    elif isinstance(system, ReplaySystemSettings):
        system = system.model_copy(update={"path": fix(system.path, "system", "path")})
    judge = settings.judge
    if judge is not None:
        update = {"cache_dir": fix(judge.cache_dir, "judge", "cache_dir")}
        if judge.backend == "local" and judge.model:  # a path; an endpoint's model is a name
            update["model"] = fix(judge.model, "judge", "model")
        judge = judge.model_copy(update=update)
    resolved = settings.model_copy(
        update={
            "judge": judge,
            "golden": fix(settings.golden, "golden"),
            "source_root": fix(settings.source_root, "source_root"),
            "storage": fix(settings.storage, "storage"),
            "system": system,
        }
    )
    if resolved.storage and resolved.storage != settings.storage and not problems:
        # A relative storage path, checked now that it is absolute (the validator skipped it).
        from kebab_eval_pipeline.storage import storage_problem

        problem = storage_problem(resolved.storage)
        if problem is not None:
            problems.append(_offender(source, positions, ["storage"], problem))
    if problems:
        raise InputError("run config is invalid", problems)
    return resolved


def _is_absolute(program: str) -> bool:
    try:
        return Path(program).expanduser().is_absolute()
    except RuntimeError:  # "~nobody/bin": fix() reports it
        return False


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
        return RunSettings.model_validate(_normalise_document(doc))
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
            if err["type"] == "extra_forbidden":
                # "did you mean": keys of the model at that place (under system, also k/answers)
                also = ("k", "answers") if loc[:-1] == ["system"] else ()
                reason = unknown_key_reason(RunSettings, err["loc"], also)
            else:
                reason = msg
            offenders.append(_offender(source, positions, loc, reason))
        raise InputError("run config is invalid", offenders) from None


def load_settings(path: str | Path | None) -> RunSettings:
    """Load run settings from a YAML file; ``None`` gives the defaults (the embedded demo).

    The file is refused before parsing when larger than ``KEBAB_EVAL_MAX_CONFIG_MB`` (default
    4 MiB); YAML is read with a safe loader (no Python object tags) that refuses alias bombs.
    """
    if path is None:
        return RunSettings()
    path = Path(path)
    text = read_text(path, "run config", CONFIG_ENV)  # bounded by KEBAB_EVAL_MAX_CONFIG_MB
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
    settings = settings_from_dict(doc, source=str(path), text=text)
    return _resolve_relative(settings, path.resolve().parent, str(path), text)


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
