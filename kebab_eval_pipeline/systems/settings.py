"""The ``system:`` block of the run config: which system under test a run asks, and how.

One model per adapter kind (reference, command, http, replay, python), chosen by ``kind``; the run config
(:mod:`kebab_eval_pipeline.settings`) composes them. Strict like every settings block: an unknown key
or an impossible value is refused when the config loads, naming the key.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from kebab_eval_pipeline.config_model import ENV_NAME_RE, AtKey, StrictSettings
from kebab_eval_pipeline.net.checks import header_name_problem, header_value_problem, url_problem
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.wire import ResponseMap

#: ``system.name``: when set, runs of the same kind and name are one system for baseline choice,
#: whatever their argv, URL, corpus or mode (kebab_eval_pipeline/systems/identity.py).
SystemName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"\S")]


class FusionSettings(StrictSettings):
    """``system.fusion``: how the reference system's hybrid mode fuses BM25 and vectors
    (reference/fusion.py); ignored by the lexical and vector modes. The defaults are
    ``reference.fusion.DEFAULT_FUSION``'s (a test keeps them equal; importing it here would load
    numpy into every CLI start)."""

    method: Literal["rrf", "minmax", "zscore"] = "rrf"
    lexical_weight: Annotated[float, Field(ge=0.0, le=1000.0)] = 1.0
    vector_weight: Annotated[float, Field(ge=0.0, le=1000.0)] = 1.5
    k_rrf: Annotated[int, Field(ge=1, le=100_000)] = 60
    # trust the vector channel only as far as the embedding model covers the query's and the
    # chunk's writing system (reference/languages.py)
    language_aware: bool = True
    depth: Annotated[int, Field(ge=1, le=10_000)] = 100

    @model_validator(mode="after")
    def _some_weight(self) -> FusionSettings:
        if self.lexical_weight + self.vector_weight <= 0:
            raise ValueError("lexical_weight and vector_weight cannot both be 0")
        return self

    def spec(self):  # -> FusionSpec (imported here: reference modules load numpy)
        """The :class:`~kebab_eval_pipeline.reference.fusion.FusionSpec` these settings name."""
        from kebab_eval_pipeline.reference.fusion import FusionSpec

        return FusionSpec(**self.model_dump())


#: The reference system: its hits, extractive answers with citations, its index's chunks and
#: manifest versions; an extractive answer calls no model, so it has no token counts.
REFERENCE_CAPABILITIES = Capabilities(
    {"token_counts": "the reference system's extractive answers call no model (no token counts)"}
)


class ReferenceSystemSettings(StrictSettings):
    """The built-in reference RAG system (SPEC §4.1)."""

    kind: Literal["reference"] = "reference"
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    corpus: str | None = None  # folder to index; default: the bundled demo corpus
    index: str | None = None  # a prebuilt index folder (``kebab-eval ref index``) instead of a corpus
    chunk_size: Annotated[int, Field(ge=50, le=100_000)] = 800
    chunk_overlap: Annotated[int, Field(ge=0, le=100_000)] = 0
    exclude: tuple[str, ...] = ()  # .gitignore-style patterns, relative to the corpus folder
    mode: Literal["lexical", "vector", "hybrid"] = "lexical"
    # BM25 / answer-gate tokenizer when building from ``corpus`` (kiwi needs the korean extra);
    # with ``index`` the index's own tokenizer is used, and a different value here is refused.
    tokenizer: Literal["words+bigrams", "kiwi"] = "words+bigrams"
    # Which model embeds chunks and queries in vector/hybrid mode (reference/vectors.py): minilm is
    # English-only; multilingual-e5-small (the `multilingual` extra) also reads Korean. Not used by
    # lexical mode, nor with `index` (a prebuilt index keeps the model it was built with).
    embedding_model: Literal["minilm", "multilingual-e5-small"] = "minilm"
    refusal_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    # what the threshold applies to (reference/answer.py GATE_FEATURES); None: the default
    refusal_feature: Literal["top_hit", "best_of_top3", "top3_union"] | None = None
    fusion: FusionSettings = Field(default_factory=FusionSettings)

    def capabilities(self) -> Capabilities:
        """What its runs carry (systems/capabilities.py): everything but token counts."""
        return REFERENCE_CAPABILITIES

    @model_validator(mode="after")
    def _one_source(self) -> ReferenceSystemSettings:
        if self.corpus and self.index:
            raise ValueError("set either 'corpus' or 'index', not both")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self


PLACEHOLDER_RE = re.compile(r"\{(query|query_id|k|mode)\}")  # the only substitutions, done in one pass


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


class CommandSystemSettings(StrictSettings):
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

    def capabilities(self) -> Capabilities:
        """What its runs can carry: hits; answers (with citations and token counts, when its JSON
        has them) with ``ask_argv`` or protocol jsonl; versions read live from ``version_argv`` or
        the jsonl process's version line. A command cannot list its index."""
        jsonl = self.protocol == "jsonl"
        return Capabilities({"index_catalogue": "a command system cannot list what its index holds"}).lacking(
            answers=None if jsonl or self.ask_argv else "the command system has no ask_argv",
            live_versions=None
            if jsonl or self.version_argv
            else "the command system has no version_argv to read its versions from",
        )

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


class HttpSystemSettings(StrictSettings):
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

    def capabilities(self) -> Capabilities:
        """What its runs can carry: hits; answers (with citations and token counts, when its JSON
        has them) with ``ask_url``; versions read live from ``version_url``. A service cannot list
        its index."""
        return Capabilities({"index_catalogue": "an http system cannot list what its index holds"}).lacking(
            answers=None if self.ask_url else "the http system has no ask_url",
            live_versions=None if self.version_url else "the http system has no version_url",
        )

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
            if not (ENV_NAME_RE.fullmatch(ref) or re.search(r"\$\{?[A-Za-z_][A-Za-z0-9_]*", ref)):
                raise ValueError(
                    f"{header}: expected an environment variable name (or a template like 'Bearer ${{NAME}}')"
                )
        return refs

    @model_validator(mode="after")
    def _mode_if_used(self) -> HttpSystemSettings:
        if self.mode is None and _templates_need_mode(self.search_request, self.ask_request):
            raise ValueError("a request template uses {mode}; set system.mode")
        return self


_NO_INDEX = "a replayed trace cannot list the index it came from"
_RECORDED = "a replayed trace holds the versions recorded with it, not live ones"

#: What each replay format's records can hold (systems/replay.py reads them).
REPLAY_FORMATS: dict[str, Capabilities] = {
    # kebab per_query.jsonl: hits, the answer object with citations and usage
    "kebab": Capabilities({"index_catalogue": _NO_INDEX, "live_versions": _RECORDED}),
    # WFGY trace.jsonl: retrieved_ids and answer_json {claim, citations}
    "wfgy": Capabilities(
        {
            "token_counts": "WFGY traces record no token counts",
            "index_catalogue": _NO_INDEX,
            "live_versions": _RECORDED,
        }
    ),
    # this project's own export: everything a run stored
    "export": Capabilities({"index_catalogue": _NO_INDEX, "live_versions": _RECORDED}),
    # OpenInference spans: retrieval documents, the LLM's output and token counts — no citations
    "openinference": Capabilities(
        {
            "citations": "OpenInference traces carry no citations",
            "index_catalogue": _NO_INDEX,
            "live_versions": _RECORDED,
        }
    ),
    # run files: rankings of document ids only
    "trec": Capabilities(
        {
            "answers": "a TREC run file holds rankings only",
            "index_catalogue": _NO_INDEX,
            "live_versions": _RECORDED,
        }
    ),
    "ranx": Capabilities(
        {
            "answers": "a ranx run holds rankings only",
            "index_catalogue": _NO_INDEX,
            "live_versions": _RECORDED,
        }
    ),
}


class ReplaySystemSettings(StrictSettings):
    """Recorded traces instead of a live system (SPEC §4 "replay")."""

    kind: Literal["replay"]
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    path: str  # a trace file (JSONL / JSON)
    format: Literal["auto", "kebab", "wfgy", "export", "openinference", "trec", "ranx"] = "auto"
    # openinference traces: how a trace finds its golden query ("question": the normalised question
    # text; else the name of an attribute holding the golden query id, e.g. metadata.query_id) and,
    # optionally, the name of the span whose retrieval.documents are the hits
    match_by: str = "question"
    retriever_span: str | None = None
    # each line's recorded hits / answer in a framework's own shape: only the field mappings apply
    response: ResponseMap = Field(default_factory=ResponseMap)

    def capabilities(self) -> Capabilities:
        """What the configured format's records can hold (:data:`REPLAY_FORMATS`); for ``auto``
        only what every format lacks, until the built system has read the file and knows its format
        (``ReplaySystem.capabilities``)."""
        if self.format != "auto":
            return REPLAY_FORMATS[self.format]
        every = [set(c.lacks) for c in REPLAY_FORMATS.values()]
        common = set.intersection(*every)
        first = next(iter(REPLAY_FORMATS.values()))
        return Capabilities({name: first.lacks[name] for name in common})

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

    @model_validator(mode="after")
    def _trace_options(self) -> ReplaySystemSettings:
        if not self.match_by.strip():
            raise ValueError("match_by: expected 'question' or an attribute name")
        if self.format in ("kebab", "wfgy", "export", "trec", "ranx"):
            given = [
                name
                for name, value in (
                    ("match_by", self.match_by != "question"),
                    ("retriever_span", self.retriever_span),
                )
                if value
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: only for OpenInference traces (format: openinference or auto)"
                )
        return self


# An args key naming a credential: api_key, openai_api_key, auth_token, password (not max_tokens).
_CREDENTIAL_ARG_RE = re.compile(
    r"(^|[-_])(api[-_]?key|secret|password|passwd|token|access[-_]?key|credentials?|auth)([-_]|$)", re.I
)

#: ``system.callable``: ``package.module:attribute`` (the attribute may be dotted: ``mod:obj.attr``).
CALLABLE_RE = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


class PythonSystemSettings(StrictSettings):
    """A system written in Python (systems/python_adapter.py): ``callable`` names a factory (called
    once per worker process, with ``args`` as keyword arguments) or the system object / search
    function itself. Its results — dicts or framework objects, converted to plain data — are read
    with the same ``response`` mapping as a command's or a service's JSON. ``isolation``: where it
    runs — ``process`` (the default), a supervised worker process of its own, so a system that ends
    its process (``os._exit``, a crash in a native library, the OOM killer) gives error rows and a
    failed ``system_health`` (systems/python_worker.py); ``in_process``, in kebab-eval's own process
    (no start-up cost; a system that ends the process ends the run with it)."""

    kind: Literal["python"]
    name: SystemName | None = None  # who this system is, for baselines (system_identity.py)
    callable: Annotated[str, Field(max_length=500)]  # "package.module:attribute"
    args: dict[str, Any] = Field(default_factory=dict)  # keyword arguments of the factory
    path: tuple[str, ...] = ()  # folders put in front of sys.path (relative to the config file)
    mode: str | None = None  # passed as mode= to search/ask (which must then accept it)
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0  # per call; a late call is abandoned
    concurrency: Annotated[int, Field(ge=1, le=64)] = 1  # calls at once (threads): needs a thread-safe system
    response: ResponseMap = Field(default_factory=ResponseMap)
    isolation: Literal["process", "in_process"] = "process"  # a worker process of its own, or ours

    def capabilities(self) -> Capabilities:
        """What its runs can carry before the object is built: hits, and answers with citations and
        token counts (when ``ask`` returns them). Whether it has ``ask``, ``catalogue()`` and
        ``versions()`` is known once built (``PythonSystem.capabilities``)."""
        return Capabilities()

    @field_validator("callable")
    @classmethod
    def _module_colon_attribute(cls, value: str) -> str:
        if not CALLABLE_RE.fullmatch(value.strip()):
            raise ValueError(
                f"{value!r}: expected 'package.module:attribute' (a module to import, a colon, "
                "then the factory, object or function in it)"
            )
        return value.strip()

    @field_validator("args")
    @classmethod
    def _no_credentials_inline(cls, args: dict[str, Any]) -> dict[str, Any]:
        # args are stored in the run's system info: a credential is read from the environment by
        # the factory instead (the rule http headers follow).
        named = [a for a in args if _CREDENTIAL_ARG_RE.search(a)]
        if named:
            raise ValueError(
                f"{', '.join(named)}: credentials cannot be written in the config file (args are "
                "stored with the run); let the factory read them from the environment"
            )
        return args


def _system_kind(value: Any) -> str:
    if isinstance(value, dict):
        return value.get("kind", "reference")
    return getattr(value, "kind", "reference")


SystemSettings = Annotated[
    Annotated[ReferenceSystemSettings, Tag("reference")]
    | Annotated[CommandSystemSettings, Tag("command")]
    | Annotated[HttpSystemSettings, Tag("http")]
    | Annotated[ReplaySystemSettings, Tag("replay")]
    | Annotated[PythonSystemSettings, Tag("python")],
    Discriminator(
        _system_kind,
        custom_error_type="system_kind",
        custom_error_message="system.kind must be one of reference, command, http, replay, python",
    ),
]


SYSTEM_KINDS = ("reference", "command", "http", "replay", "python")
