"""Help that reads as written: the click command tree of the CLI, tidied before it runs.

Typer renders ``--help`` with Rich, which (in typer 0.29) does three things to our text:

* it parses help strings as Rich markup, so a bracketed word vanishes — ``pip install -e
  ".[vectors]"`` prints as ``pip install -e "."``, ``[n] markers`` as `` markers``;
* it keeps the single line breaks of a docstring, so a paragraph breaks wherever the source line
  ended (``…prompt version — from`` / ``its stored golden set…``), not where the terminal does;
* it labels every flag, ``--help`` included, with a ``<bool>`` type, as if it took a value.

:func:`tidy` undoes all three on a built command tree: help paragraphs are joined into single
lines (Rich wraps them to the terminal), markup-looking brackets are escaped (they print as
written), and flags get an empty type label (``--judge/--no-judge`` says what it takes).
Paragraphs that start with ``\\b`` (click's "keep as is" marker) are left as they are.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

#: What Rich takes for a markup tag (rich.markup's own pattern), with the backslashes before it;
#: else backslashes before a "[" that starts no tag (Rich drops one of them too).
_BRACKET = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])|(\\+)\[")


def escape(text: str) -> str:
    """``text`` as Rich markup that prints as ``text``: a tag-like ``[word]`` gets a backslash
    (and backslashes before it are doubled), a backslash before any other ``[`` one more. Unlike
    ``rich.markup.escape`` a trailing backslash is left alone — help is rendered on its own, never
    joined to markup that follows it."""

    def literal(m: re.Match[str]) -> str:
        if m[2] is not None:
            return f"{m[1]}{m[1]}\\{m[2]}"
        return f"{m[3]}\\["

    return _BRACKET.sub(literal, text)


def reflow(text: str | None) -> str | None:
    """``text`` with each paragraph (blocks split by a blank line) on one line, Rich markup
    escaped; None and "" are returned as they are. A ``\\b`` paragraph keeps its line breaks;
    anything after a ``\\f`` line (click's "not for help" marker) is dropped, as click does."""
    if not text:
        return text
    text = inspect.cleandoc(text).partition("\f")[0].strip()
    paragraphs = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(" ".join(line.strip() for line in paragraph.splitlines() if line.strip()))
    return escape("\n\n".join(p for p in paragraphs if p))


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path of names below the root, command) for ``command`` and every subcommand, depth first
    in the order they are registered; the root's path is ``()``."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from walk(sub, (*path, name))


def tidy(command: Any) -> Any:
    """Tidy the help of ``command`` (a typer/click command or group) and of all its subcommands,
    in place; returns ``command``. Idempotent: a tidied tree is left as it is."""
    from typer import _click

    for path, cmd in walk(command):
        if getattr(cmd, "_kebab_help_tidied", False):
            continue
        cmd.help = reflow(cmd.help)
        cmd.short_help = reflow(cmd.short_help)
        # The help option is made on first use and cached on the command: make it now, so it is
        # tidied like the others (its names come from the context settings, as at run time).
        ctx = _click.Context(cmd, info_name=path[-1] if path else "kebab-eval")
        params = [*cmd.params, *filter(None, [cmd.get_help_option(ctx)])]
        for param in params:
            if getattr(param, "help", None):
                param.help = reflow(param.help)
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # shown as the type: a flag takes no value
        cmd._kebab_help_tidied = True
    return command
