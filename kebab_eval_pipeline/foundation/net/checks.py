"""Checks of the HTTP pieces a config names — URLs and headers — so a bad one is refused when the
config loads (naming the key) instead of failing every query as a ``connection`` error.

Each function returns the reason a value is unusable, or None; callers turn it into an
:class:`~kebab_eval_pipeline.foundation.errors.InputError` (or a pydantic ``ValueError``). A reason never
quotes a header value: values may be secrets.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# RFC 9110 §5.6.2: a field name is a token.
_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Characters no host name holds; "{mode}" in a host (templates are for bodies) is the usual slip.
_BAD_HOST_CHARS = set("{}<>\\^`|\"'")


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a usable ``http(s)://`` URL: whitespace or control characters, another
    scheme, no host, a port outside 1-65535 or not a number, a broken IPv6 literal, a character
    no host may hold, or anything httpx refuses to parse."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "not a valid URL: contains whitespace or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for 99999 or "x"
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535"
        return f"not a valid URL: {exc}"
    if parts.scheme.lower() not in ("http", "https"):
        return "expected an http:// or https:// URL"
    if not parts.hostname:
        return "not a valid URL: no host"
    if port == 0:
        return "not a valid URL: port 0 (use 1-65535)"
    if _BAD_HOST_CHARS & set(parts.hostname):
        return f"not a valid URL: host {parts.hostname!r} holds characters no host name has"
    import httpx  # the client the adapters use: what it cannot parse fails every request

    try:
        httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        return f"not a valid URL: {exc}"
    return None


def header_name_problem(name: str) -> str | None:
    """Why ``name`` is not an HTTP header name (a token: no spaces, CR/LF, NUL, ':' …)."""
    if not name:
        return "empty header name"
    if not _TOKEN_RE.fullmatch(name):
        return "not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; no spaces or line breaks)"
    return None


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as a header value: CR, LF, NUL or another control character
    (a header-injection risk), or a non-ASCII character (httpx sends ASCII only). Never quotes it."""
    if any(c in "\r\n\x00" for c in value):
        return "the value contains a line break (CR/LF) or NUL"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
        return "the value contains a control character"
    if not value.isascii():
        return "the value contains non-ASCII characters (headers are sent as ASCII)"
    return None
