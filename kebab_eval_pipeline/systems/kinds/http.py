"""The ``http`` system kind: a search/ask HTTP service (:mod:`kebab_eval_pipeline.systems.http`).

Identity: the search URL without user info and query string (either may carry a credential),
and ``mode``. Header values never enter it; they are secrets the run masks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from kebab_eval_pipeline.foundation.config_model import ENV_NAME_RE, AtKey, StrictSettings
from kebab_eval_pipeline.foundation.net.checks import header_name_problem, header_value_problem, url_problem
from kebab_eval_pipeline.foundation.net.secrets import header_secrets, redact_url, url_secrets
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import SystemKind, SystemName, adapter, register
from kebab_eval_pipeline.systems.templates import DEFAULT_MAX_RESPONSE_MB, templates_need_mode
from kebab_eval_pipeline.systems.wire import ResponseMap

if TYPE_CHECKING:
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest


_CREDENTIAL_HEADER_RE = re.compile(r"auth|cookie|token|secret|passw|api[-_]?key|credential|signature", re.I)


class HttpSystemSettings(StrictSettings):
    """A search/ask HTTP service (SPEC §4 "http"): JSON POSTs with a templated body, retries with
    exponential backoff on connection errors, 429 and 5xx, bounded concurrency. Header values
    come from environment variables named here; they are never logged or stored."""

    kind: Literal["http"]
    name: SystemName | None = None  # who this system is, for baselines (systems/identity.py)
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
        if self.mode is None and templates_need_mode(self.search_request, self.ask_request):
            raise ValueError("a request template uses {mode}; set system.mode")
        return self


def build(settings: HttpSystemSettings) -> SystemUnderTest:
    """The http adapter (a ValueError for a header variable that is not set)."""
    return adapter("kebab_eval_pipeline.systems.http:HttpSystem")(settings)


def identity(settings: HttpSystemSettings) -> str:
    """The search URL, redacted."""
    return redact_url(settings.search_url)


def stored_target(details: Mapping[str, Any]) -> str | None:
    """The search URL a run stored (redacted when it was stored)."""
    return details.get("search_url")


def label(details: Mapping[str, Any]) -> str:
    """The search URL: ``http: http://h:8080/search``."""
    return str(details["search_url"]) if details.get("search_url") else ""


def secrets(settings: HttpSystemSettings, env: Mapping[str, str] | None) -> list:
    """The ``headers_from_env`` values and the credentials in its URLs."""
    found = header_secrets(settings.headers_from_env, env)
    for name in ("search_url", "ask_url", "version_url"):
        found += url_secrets(getattr(settings, name), f"system.{name}")
    return found


KIND = register(
    SystemKind(
        name="http",
        settings=HttpSystemSettings,
        build=build,
        identity=identity,
        label=label,
        capabilities=HttpSystemSettings.capabilities,
        stored_target=stored_target,
        secrets=secrets,
        probed=True,
        version_source="version_url",
    )
)
