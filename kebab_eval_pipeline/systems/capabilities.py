"""What a system's runs can carry: hits, answers, citations, token counts, an index catalogue, live
versions — declared once per system kind (its module in :mod:`.kinds`) and per replay
format, refined by the built system where only it can tell (a python object without ``ask``, a
replay file in ``auto`` format).

A metric whose inputs a run lacks is *not measured*: null with the reason, never 0
(``metrics.catalogue.Measure.needs`` says what each metric needs). A gate the user wrote on such a
metric is refused; a default gate on it is left out. The run records its effective capabilities in
its system info (``SystemInfo.capabilities``, :meth:`Capabilities.as_dict`).

Pure data, no imports from the package: the run config, the adapters, the metrics and the reports
all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Every capability, in the order they are shown.
CAPABILITIES: tuple[str, ...] = (
    "hits",  # ranked hits per query
    "answers",  # an answer (or a refusal) per query
    "citations",  # the answer's citations
    "token_counts",  # the answer's prompt/completion token counts
    "index_catalogue",  # what the index holds (chunk ids, documents, sections), for stale-gold checks
    "live_versions",  # the system's versions, read from it at the moment they are asked for
)
#: Capabilities that only exist on an answer: lacking answers, a run lacks them too (same reason).
ON_ANSWERS: tuple[str, ...] = ("citations", "token_counts")


@dataclass(frozen=True)
class Capabilities:
    """What a system's runs can carry: every capability of :data:`CAPABILITIES` but those in
    ``lacks`` (capability → why its runs cannot carry it, a phrase for people: "OpenInference
    traces carry no citations"). Lacking answers implies lacking citations and token counts."""

    lacks: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.lacks) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"unknown capabilities {unknown}; expected some of {CAPABILITIES}")
        lacks = dict(self.lacks)
        if "answers" in lacks:
            for name in ON_ANSWERS:
                lacks.setdefault(name, lacks["answers"])
        object.__setattr__(self, "lacks", {n: lacks[n] for n in CAPABILITIES if n in lacks})

    def carries(self, name: str) -> bool:
        """True when the system's runs can carry ``name``."""
        if name not in CAPABILITIES:
            raise ValueError(f"unknown capability {name!r}; expected one of {CAPABILITIES}")
        return name not in self.lacks

    def reason(self, name: str) -> str | None:
        """Why the runs cannot carry ``name``; None when they can."""
        return self.lacks.get(name)

    def lacking(self, **reasons: str | None) -> Capabilities:
        """These capabilities with more lacking (``answers="the object has no ask method"``); a
        ``None`` reason lacks nothing; a capability already lacking keeps its first reason."""
        more = {name: why for name, why in reasons.items() if why}
        return Capabilities({**more, **self.lacks})

    def as_dict(self) -> dict[str, Any]:
        """``{"carries": [...], "lacks": {capability: reason}}``: what a run stores."""
        return {"carries": [n for n in CAPABILITIES if n not in self.lacks], "lacks": dict(self.lacks)}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any] | None) -> Capabilities | None:
        """What :meth:`as_dict` stored; None for a run stored before capabilities were recorded."""
        if not isinstance(stored, Mapping) or not isinstance(stored.get("lacks"), Mapping):
            return None
        return cls({str(k): str(v) for k, v in stored["lacks"].items() if k in CAPABILITIES})


#: A system whose runs can carry everything.
EVERYTHING = Capabilities()


def run_lacks(capabilities: Capabilities | None, answers: bool) -> dict[str, str]:
    """What one run lacks: its system's lacking capabilities (none when unknown: a run stored
    before they were recorded), plus answers — and so citations and token counts — when the run did
    not ask for them (``answers: false``)."""
    caps = capabilities or EVERYTHING
    if not answers:
        caps = caps.lacking(answers="the run does not ask for answers (answers: false)")
    return dict(caps.lacks)
