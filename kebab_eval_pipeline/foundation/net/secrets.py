"""Credentials: header values read from environment variables, and every text the tool keeps,
prints or writes masked of them — in whatever form a system echoes them.

Secrets come from the environment (the http adapter's ``headers_from_env``, the judge's
``api_key_env``, the run config's ``secrets_from_env`` — and any variable named like a credential,
``*_TOKEN``, ``*_API_KEY``, ``*_PASSWORD``, whose value looks like a key: :func:`ambient_secrets`)
and from URLs (user info, query-string values). A run builds one :class:`SecretMask` of them
(``RunSettings.secret_mask``); it replaces each secret by ``***`` in text, in table columns (one
compiled pattern for every secret, applied column by column) and in nested values — raw, or in
the forms a system echoes a value in:

* JSON-escaped: ``\\/``, ``\\"``, ``\\uXXXX`` (any character, any number of backslashes: an
  escape escaped again), Python's ``\\xXX``;
* URL-encoded: ``%XX`` (either case) for any character, ``+`` for a space;
* HTML: ``&#NN;``, ``&#xHH;``, ``&quot;`` / ``&amp;`` / ``&lt;`` / ``&gt;``;
* base64, standard and urlsafe, padded or not — also where the secret is part of a longer encoded
  value (``base64("user:" + password)`` of Basic auth): each of the three byte alignments of the
  secret encodes to a fixed run of characters, and that run is masked;
* ``Bearer <token>``: the token alone is a secret too (a header value is split on whitespace;
  the scheme word is not).

A value shorter than :data:`MIN_SECRET_CHARS` characters is not masked: a 3-character key would
turn every "abc" of every snippet into ``***`` (and still not be safe: its forms are common text).
:attr:`SecretMask.too_short` names where such values came from, so the run warns about them.

What an error message quotes — an exception's text, a URL — also goes through :func:`scrub_text` /
:func:`redact_url`: URL user info and query strings are dropped.

The process also keeps the masks of the run configs it loaded (:func:`remember`, :func:`active`):
the last-line pass over what the CLI prints and writes (reports, JUnit, summaries, exports) uses
them, so text built from a value that escaped the boundaries is still masked.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.net.checks import header_value_problem

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
REDACTED = "***"
_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")
#: Shorter values are not masked (they would mask unrelated text) and are reported as too short.
MIN_SECRET_CHARS = 8
# The scheme word of an Authorization value: never a secret on its own.
AUTH_SCHEMES = frozenset({"bearer", "basic", "digest", "token", "apikey", "api-key", "negotiate"})
_HTML_NAMED = {'"': "&quot;", "&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#39;"}


def resolve_headers(refs: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Header values from environment variables: ``{"Authorization": "API_KEY"}`` or
    ``{"Authorization": "Bearer ${API_KEY}"}``.

    Raises ValueError naming the header and the variable (never a value) when one is unset
    or empty, and InputError (field ``system.headers_from_env.<header>``) when a value holds
    CR/LF, NUL, another control character or non-ASCII text.
    """
    env = os.environ if env is None else env
    headers, missing = {}, []
    for header, ref in refs.items():
        names = _env_names(ref)
        absent = [n for n in names if not env.get(n)]
        if absent:
            missing += [f"{header} needs ${n}" for n in absent]
            continue
        headers[header] = (
            _ENV_REF.sub(lambda m: env[m.group(1) or m.group(2)], ref) if "$" in ref else env[ref]
        )
    if missing:
        raise ValueError("environment variable(s) not set: " + "; ".join(missing))
    # A CR/LF in a variable would inject a header (or fail every query as `connection`): refused
    # before the first query, naming the header and the variable, never the value.
    bad = [
        Offender(
            "<environment>",
            f"{problem} (from {', '.join('$' + n for n in _env_names(refs[name]))})",
            field=f"system.headers_from_env.{name}",
        )
        for name, value in headers.items()
        if (problem := header_value_problem(value)) is not None
    ]
    if bad:
        raise InputError("a header value from the environment cannot be sent", bad)
    return headers


def _env_names(ref: str) -> list[str]:
    """The variables a ``headers_from_env`` entry reads: ``"API_KEY"`` or ``"Bearer ${API_KEY}"``."""
    return [a or b for a, b in _ENV_REF.findall(ref)] if "$" in ref else [ref]


def redact_url(url: str) -> str:
    """``url`` without user info and query string (either may carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def scrub_text(text: str, secrets: Sequence[str] | SecretMask) -> str:
    """``text`` with URLs stripped of user info and query string (httpx names the URL in its
    messages) and every one of ``secrets`` replaced by ``***`` in any echoed form
    (:class:`SecretMask`; a list of values is masked like a mask of them)."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    mask = secrets if isinstance(secrets, SecretMask) else SecretMask.of(Secret("", s) for s in secrets)
    return mask.text(text)


# -- the mask -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Secret:
    """One secret value and where it came from (``$NAME``, ``system.search_url user info``): the
    source is what a warning names, never the value."""

    source: str
    value: str


def _hex(byte: int) -> str:
    """``byte`` as two hex digits matching either case, e.g. ``2[fF]``."""
    return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{byte:02x}")


def _literal(text: str) -> str:
    """``text`` as a pattern matching itself (``\\xHH`` for every non-alphanumeric character, a
    syntax both Python's ``re`` and Arrow's RE2 read the same)."""
    return "".join(
        c if c.isascii() and c.isalnum() else f"\\x{ord(c):02x}" if ord(c) < 256 else c for c in text
    )


def _char(c: str) -> str:
    """A pattern for one character of a secret in any of its echoed forms (module docstring)."""
    code = ord(c)
    forms = [_literal(c)]
    if not (c.isascii() and c.isalnum()):
        forms.append(r"\\+" + _literal(c))  # JSON / Python escape of a punctuation character: \/ \"
    if code <= 0xFFFF:
        forms.append(r"\\+u" + "".join(_hex(b) for b in code.to_bytes(2, "big")))  # \u002f
    if code < 256:
        forms.append(r"\\+x" + _hex(code))  # \x2f
    forms.append("".join("%" + _hex(b) for b in c.encode("utf-8")))  # %2F, %C3%A9
    if c == " ":
        forms.append(r"\+")
    forms += [f"&#0*{code};", f"&#[xX]0*{_hex(code) if code < 256 else format(code, 'x')};"]
    if c in _HTML_NAMED:
        forms.append(_literal(_HTML_NAMED[c]))
    return forms[0] if len(forms) == 1 else "(?:" + "|".join(forms) + ")"


def _base64_runs(value: str) -> set[str]:
    """The characters a base64 encoding of ``value`` always contains, whatever surrounds it: for
    each of the three byte alignments, the encoded characters that only the value's bytes decide
    (standard and urlsafe alphabets), and the whole encoding of ``value`` alone (padding is
    optional: it is matched as part of the longer form, or left)."""
    data = value.encode("utf-8")
    # the value encoded alone, whole (its last characters and padding included)
    whole = base64.b64encode(data).decode()
    runs = {whole, whole.replace("+", "-").replace("/", "_")}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode()
        start = -(-offset * 8 // 6)  # the first character with no bits of the bytes before
        end = (offset + len(data)) * 8 // 6  # past the last character with no bits after
        run = encoded[start:end]
        if len(run) >= MIN_SECRET_CHARS:
            runs |= {run, run.replace("+", "-").replace("/", "_")}
    return runs


@dataclass(frozen=True)
class SecretMask:
    """Every secret of a run, and the one pattern that finds any of them in any echoed form.

    Build it with :meth:`of`; an empty mask (no secrets) changes nothing and costs nothing."""

    secrets: tuple[Secret, ...] = ()
    too_short: tuple[str, ...] = ()  # sources of values below MIN_SECRET_CHARS: not masked
    pattern: str | None = None  # one regex of every secret's forms, longest first
    _compiled: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, secrets: Iterable[Secret]) -> SecretMask:
        """The mask of ``secrets`` (duplicates merged; short values set aside as ``too_short``)."""
        kept: dict[str, Secret] = {}
        short: list[str] = []
        for secret in secrets:
            if not secret.value:
                continue
            if len(secret.value) < MIN_SECRET_CHARS:
                short.append(secret.source)
            else:
                kept.setdefault(secret.value, secret)
        texts = set(kept)
        for value in kept:
            texts |= _base64_runs(value)
        if not texts:
            return cls(too_short=tuple(dict.fromkeys(short)))
        # longest first: a secret containing another is masked whole
        pattern = "|".join("".join(_char(c) for c in t) for t in sorted(texts, key=lambda t: (-len(t), t)))
        return cls(tuple(kept.values()), tuple(dict.fromkeys(short)), pattern, re.compile(pattern))

    def __bool__(self) -> bool:
        return self.pattern is not None

    def warnings(self) -> list[str]:
        """One warning per source of a value too short to mask (naming the source, never the value)."""
        return [
            f"the secret from {source} is shorter than {MIN_SECRET_CHARS} characters: it is not masked "
            "in what the run stores and prints (masking so short a value would mask unrelated text); "
            "use a longer credential"
            for source in self.too_short
        ]

    def __or__(self, other: SecretMask) -> SecretMask:
        if not other or set(other.secrets) <= set(self.secrets):
            return self if self or not other.too_short else other
        if not self or set(self.secrets) <= set(other.secrets):
            return other
        return SecretMask.of((*self.secrets, *other.secrets))

    def text(self, text: str) -> str:
        """``text`` with every form of every secret replaced by ``***``."""
        if self._compiled is None or not text:
            return text
        return self._compiled.sub(REDACTED, text)

    def value(self, value: Any) -> Any:
        """``value`` masked: a string, and the strings inside lists, tuples and dicts (keys too)."""
        if self._compiled is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def model(self, model: Any) -> Any:
        """A pydantic model (a system's info) with every string in it masked; the same object when
        the mask is empty."""
        if self._compiled is None:
            return model
        return type(model).model_validate(self.value(model.model_dump()))

    def frame(self, frame: Any) -> Any:
        """A pandas DataFrame with every text column masked (string columns by one vectorised
        replace each; object columns — lists such as ``heading_path`` — value by value, only when
        one of them holds a secret's form). The same frame when nothing changes."""
        if self._compiled is None or not len(frame):
            return frame
        out = None
        for name in frame.columns:
            column = frame[name]
            kind = column.dtype.kind
            if str(column.dtype) == "string" or kind == "O":
                masked = self._column(column)
                if masked is not None:
                    out = frame.copy() if out is None else out
                    out[name] = masked
        return frame if out is None else out

    def _column(self, column: Any) -> Any:
        """``column`` masked, or None when no value holds a secret (nothing is copied then)."""
        if str(column.dtype) == "string":
            found = column.str.contains(self.pattern, regex=True, na=False)
            if not found.any():
                return None
            return column.str.replace(self.pattern, REDACTED, regex=True)
        # object columns: lists of strings (heading_path, scope), or plain strings
        text = column.map(lambda v: None if v is None else repr(v) if not isinstance(v, str) else v)
        if not text.map(lambda v: v is not None and self._compiled.search(v) is not None).any():
            return None
        return column.map(self.value)


_remembered = SecretMask()
_lock = threading.Lock()


def remember(mask: SecretMask) -> None:
    """Add ``mask``'s secrets to what this process masks in everything it prints and writes."""
    global _remembered
    if mask:
        with _lock:
            _remembered = _remembered | mask


def active() -> SecretMask:
    """Every secret of the run configs this process loaded (:func:`remember`)."""
    return _remembered


def mask_text(text: str) -> str:
    """``text`` masked of every secret this process knows (the last-line pass)."""
    return _remembered.text(text)


def mask_bytes(data: bytes) -> bytes:
    """UTF-8 ``data`` masked of every secret this process knows; other bytes (Parquet) as given."""
    if not _remembered or not data:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    masked = _remembered.text(text)
    return data if masked == text else masked.encode("utf-8")


def header_secrets(refs: Mapping[str, str], env: Mapping[str, str] | None = None) -> list[Secret]:
    """The secrets of a ``headers_from_env`` mapping: each variable's value, each header's whole
    value and its tokens (``Bearer <token>``: the token; not the scheme word). Unset variables give
    none (:func:`resolve_headers` refuses them where they are needed)."""
    env = os.environ if env is None else env
    out: list[Secret] = []
    for header, ref in refs.items():
        names = _env_names(ref)
        values = {n: env.get(n) or "" for n in names}
        out += [Secret(f"${n}", v) for n, v in values.items()]
        if all(values.values()):
            whole = (
                _ENV_REF.sub(lambda m, v=values: v[m.group(1) or m.group(2)], ref)
                if "$" in ref
                else values[ref]
            )
            source = f"header {header}"
            out.append(Secret(source, whole))
            tokens = [p for p in whole.split() if p.lower() not in AUTH_SCHEMES]
            out += [Secret(source, p) for p in tokens if p != whole]
            out += [Secret(f"{source} (decoded)", d) for p in tokens for d in _basic_credentials(p)]
    return out


def _basic_credentials(token: str) -> list[str]:
    """What a ``Basic`` token encodes — ``user:password``, and the password — when ``token`` is
    base64 of printable text with a colon: a service may echo the decoded form."""
    try:
        text = base64.b64decode(token, validate=True).decode("utf-8")
    except ValueError:  # not base64, or not UTF-8 text (binascii.Error is a ValueError)
        return []
    if ":" not in text or not text.isprintable():
        return []
    return [text, text.partition(":")[2]]


def url_secrets(url: str | None, source: str) -> list[Secret]:
    """The credentials written in ``url``: its password (and ``user:password``, what Basic auth
    encodes) and every query-string value."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        password = parts.password
        user = parts.username
    except ValueError:
        return []
    out = []
    if password:
        out.append(Secret(f"{source} password", unquote(password)))
        out.append(Secret(f"{source} user info", f"{unquote(user or '')}:{unquote(password)}"))
    out += [Secret(f"{source} query {k}", v) for k, v in parse_qsl(parts.query, keep_blank_values=False)]
    return out


#: An environment variable named like a credential: ``SEARCH_TOKEN``, ``OPENAI_API_KEY``,
#: ``DB_PASSWORD``, ``AWS_SECRET_ACCESS_KEY`` (not ``MAX_TOKENS`` or ``TOKENIZERS_PARALLELISM``).
CREDENTIAL_ENV_RE = re.compile(
    r"(^|_)(TOKEN|API_?KEY|SECRET|SECRET_KEY|SECRET_ACCESS_KEY|PASSWORD|PASSWD|ACCESS_KEY|"
    r"CREDENTIALS?|AUTH)$",
    re.I,
)
#: A credential-named variable nobody configured is masked only when its value looks like a key:
#: this long, and of letters and digits or symbols (``postgres`` or ``changeme`` stay readable).
AMBIENT_MIN_CHARS = 12


def ambient_secrets(env: Mapping[str, str] | None = None) -> list[Secret]:
    """The values of the environment's credential-named variables (:data:`CREDENTIAL_ENV_RE`)
    that look like keys: a system under test may read one without the config naming it. A
    value that is short or all letters is left (it would mask ordinary words), without a warning:
    the config did not name it."""
    env = os.environ if env is None else env
    return [
        Secret(f"${name}", value)
        for name, value in env.items()
        if CREDENTIAL_ENV_RE.search(name)
        and len(value) >= AMBIENT_MIN_CHARS
        and not value.isalpha()
        and not value.isdigit()
        and not value.isspace()
    ]


def env_secrets(names: Iterable[str], env: Mapping[str, str] | None = None) -> list[Secret]:
    """The values of the environment variables ``names`` (unset ones: nothing to mask)."""
    env = os.environ if env is None else env
    return [Secret(f"${n}", env.get(n) or "") for n in names]
