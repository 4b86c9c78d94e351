"""The ``replay`` system kind: recorded traces instead of a live system
(:mod:`kebab_eval_pipeline.systems.replay`): kebab's per_query.jsonl, WFGY traces, this project's
export, OpenInference spans, TREC and ranx run files.

Identity: the trace file's absolute path (re-recording the same file is a new version); a replay
has no mode of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import PathFixer, SystemKind, SystemName, adapter, register
from kebab_eval_pipeline.systems.wire import ResponseMap

if TYPE_CHECKING:
    from kebab_eval_pipeline.contract import SystemInfo
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest


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
    name: SystemName | None = None  # who this system is, for baselines (systems/identity.py)
    path: str  # a trace file (JSONL / JSON)
    format: Literal[("auto", *REPLAY_FORMATS)] = "auto"  # type: ignore[valid-type]
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
        if self.format not in ("auto", "openinference"):
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


def build(settings: ReplaySystemSettings) -> SystemUnderTest:
    """The replay adapter: InputError for an unreadable trace, naming every bad line."""
    return adapter("kebab_eval_pipeline.systems.replay:ReplaySystem")(settings)


def live_info(settings: ReplaySystemSettings) -> SystemInfo:
    """The trace's info as the file is now, the parse kept per process while the file is
    unchanged: a sensor in the daemon reads it at every tick (a run's system is built uncached)."""
    return adapter("kebab_eval_pipeline.systems.replay:ReplaySystem")(settings, cached=True).info()


def identity(settings: ReplaySystemSettings) -> str:
    """The trace file's absolute path."""
    return str(Path(settings.path).resolve())


def stored_target(details: Mapping[str, Any]) -> str | None:
    """The trace path a run stored."""
    return details.get("trace")


def label(details: Mapping[str, Any]) -> str:
    """The trace's file name: ``replay: run.jsonl``."""
    return PurePath(str(details["trace"])).name if details.get("trace") else ""


def resolve_paths(settings: ReplaySystemSettings, fix: PathFixer) -> ReplaySystemSettings:
    """The trace file against the config file's folder."""
    return settings.model_copy(update={"path": fix(settings.path, "system", "path")})


KIND = register(
    SystemKind(
        name="replay",
        settings=ReplaySystemSettings,
        build=build,
        identity=identity,
        label=label,
        capabilities=ReplaySystemSettings.capabilities,
        stored_target=stored_target,
        resolve_paths=resolve_paths,
        live_info=live_info,
        identity_mode=False,
    )
)
