"""The generated reference of the documentation site: markdown made from the single sources when the
site is built (docs/hooks.py places it), so it says what the code does.

- :func:`metrics`: every measure of ``metrics.catalogue.measures()`` with its facts;
- :func:`config`: every key of the run config, walking ``RunSettings`` and the models it nests
  (each system kind's among them) — type, default, allowed values, the field's description or,
  as this code base documents its settings, the comment beside or above it in the model's source,
  and an example: the value the documentation's own (tested) configs give it;
- :func:`cli`: every command of ``kebab-eval`` from its click command tree;
- :func:`exit_codes`: ``foundation.errors.EXIT_CODES``;
- :func:`storage`: where a run's files are stored, from ``store.layout`` and the chain's stages;
- :func:`layout`: every package and module of ``kebab_eval_pipeline`` with its docstring's first
  paragraph.

Text from the code is escaped for markdown; its ``code`` spans stay code. Parenthesised citations of
the project contract are dropped (the documentation never cites it).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import io
import re
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Iterator
from enum import Enum

import annotated_types
import yaml
from pydantic import BaseModel, Tag
from pydantic_core import PydanticUndefined

# -- markdown ---------------------------------------------------------------------------------

# ``{…}`` too: attr_list reads a trailing one as HTML attributes
_ESCAPE = str.maketrans({c: "\\" + c for c in "\\`*_[]{}|"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"})
# ``code`` or `code`, optionally with a Sphinx role (:class:`~pkg.Name`)
_CODE = re.compile(r"(?::[\w:]+:)?(``?)(?!`)(.+?)\1(?!`)")
_CITATION = re.compile(r"\s*\([^()]*(?:\bSPEC\b|§)[^()]*\)")
_PRAGMA = re.compile(r"(type:\s*ignore|noqa|pragma)\b")


def text(value: object) -> str:
    """``value`` as markdown text that shows as written (also inside a table cell)."""
    return str(value).translate(_ESCAPE)


def code(value: object) -> str:
    """``value`` as an inline code span (a ``|`` in it does not end a table cell)."""
    value = str(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def prose(value: str) -> str:
    """Docstring or comment text as markdown: its code spans as code, the rest escaped, citations of
    the project contract dropped."""
    value = _CITATION.sub("", value)
    out, start = [], 0
    for m in _CODE.finditer(value):
        # a Sphinx role's "~" (:func:`~pkg.name`) shortens the name; elsewhere it is text (~/.cache)
        out += [text(value[start : m.start()]), code(m[2].lstrip("~") if m[0].startswith(":") else m[2])]
        start = m.end()
    return "".join([*out, text(value[start:])])


def paragraphs(doc: str | None) -> str:
    """A docstring as markdown paragraphs (a ``- `` line starts a list item)."""
    if not doc:
        return ""
    blocks = []
    for block in inspect.cleandoc(doc).split("\n\n"):
        items: list[list[str]] = []
        for line in block.splitlines():
            if line.startswith("- ") or not items:
                items.append([line])
            else:
                items[-1].append(line.strip())
        lines = [prose(" ".join(item)) for item in items]
        if len(lines) > 1 and not lines[0].startswith("- "):
            lines[0] += "\n"  # a list needs a blank line after the paragraph it follows
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A markdown table (cells are markdown already)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(*parts: str) -> str:
    """An HTML id made of ``parts`` (lower case letters, digits and ``-``)."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


# -- metrics ----------------------------------------------------------------------------------

_DIRECTION = {
    "higher": "higher is better",
    "lower": "lower is better",
    "none": "neither: a size (a gate reads it as higher is better)",
}
_TEST = {
    "binary": "exact McNemar (0/1 per query)",
    "graded": "paired randomization test (graded per query)",
}


def metric_name(measure) -> str:
    """The name a measure is listed under: ``ndcg@k`` for an ``@k`` family."""
    return f"{measure.name}@k" if measure.at_k else measure.name


def metric_anchor(measure) -> str:
    """The id of a measure's section."""
    return anchor("metric", measure.name, "at-k" if measure.at_k else "")


def _k(value: str) -> str:
    return value.replace("{k}", "k")


def _sentence(value: str) -> str:
    """A catalogue phrase (``share of the top k hits …``) as a sentence."""
    value = value[:1].upper() + value[1:]
    return prose(value if value.endswith(".") else value + ".")


def metrics() -> str:
    """Every measure of the metric catalogue, family by family, in report order."""
    from kebab_eval_pipeline.metrics import catalogue
    from kebab_eval_pipeline.metrics.settings import DEFAULT_KS

    entries = catalogue.measures()
    example = next(m for m in entries if m.at_k and m.trec_eval)
    k = max(DEFAULT_KS)
    out = [
        f"An `@k` family is reported at every cut-off of the run config's `k` (default "
        f"{', '.join(map(str, DEFAULT_KS))}): {code(metric_name(example))} at k = {k} is "
        f"{code(example.metric(k))}, trec_eval's {code(example.trec_eval.replace('{k}', str(k)))}. "
        "Below, `k` in a name stands for the cut-off.",
        "",
        table(
            ("metric", "family", "direction", "trec_eval", "ir_measures"),
            [
                (
                    f"[{code(metric_name(m))}](#{metric_anchor(m)})",
                    text(m.family),
                    text(m.direction),
                    code(_k(m.trec_eval)) if m.trec_eval else "—",
                    code(_k(m.ir_measures)) if m.ir_measures else "—",
                )
                for m in entries
            ],
        ),
    ]
    family_notes = element_comments(catalogue, "FAMILIES")
    for family in catalogue.FAMILIES:
        members = [m for m in entries if m.family == family]
        if not members:
            continue
        note = family_notes.get(family)
        out += [
            "",
            f"## {text(family)}" + (f" — {prose(note)}" if note else "") + f" {{#family-{anchor(family)}}}",
        ]
        for m in members:
            out += [
                "",
                f"### {code(metric_name(m))} {{#{metric_anchor(m)}}}",
                "",
                _sentence(_k(m.description)),
                "",
            ]
            out += [f"- **{label}:** {value}" for label, value in _metric_facts(m)]
    return "\n".join(out) + "\n"


def _metric_facts(m) -> Iterator[tuple[str, str]]:
    if m.column is None:
        yield (
            "per-query column",
            "none: not a mean of per-query scores"
            + (f" (computed from {', '.join(code(_k(c)) for c in m.reads)})" if m.reads else ""),
        )
    else:
        described = f" — {prose(_k(m.column_description))}" if m.column_description else ""
        yield "per-query column", f"{code(_k(m.column))} of `query_scores`, whose mean it is{described}"
    yield "denominator", prose(m.denominator)
    yield "direction", _DIRECTION[m.direction]
    if m.test is None:
        yield "paired test", "none — " + prose(m.untestable or "not a mean of per-query scores")
    else:
        yield "paired test", _TEST[m.test]
    yield (
        "per slice",
        (
            f"yes: computed per breakdown slice, so {code(m.metric(10) + '[lang=ko]')} can be gated"
            if m.sliceable
            else "no"
        ),
    )
    yield (
        "relevance level",
        (
            "honoured: a support counts from the run's `relevance_level` up (trec_eval's `-l`)"
            if m.relevance_level
            else "not read"
        ),
    )
    yield "needs", ", ".join(map(code, m.needs)) if m.needs else "nothing: measured on every run"
    yield "trec_eval", code(_k(m.trec_eval)) if m.trec_eval else "—"
    yield "ir_measures", code(_k(m.ir_measures)) if m.ir_measures else "—"


# -- comments in the source -----------------------------------------------------------------


def _source_comments(source: str) -> dict[int, tuple[str, bool]]:
    """line → (comment text, alone on its line) of every comment of ``source``."""
    lines = source.splitlines()
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            found[row] = (token.string.lstrip("#").strip(), not lines[row - 1][:col].strip())
    return found


def _statement_comment(node: ast.stmt, comments: dict[int, tuple[str, bool]]) -> str:
    """The comment lines right above ``node`` and the comments on its own lines, pragmas left out."""
    above, row = [], node.lineno - 1
    while row in comments and comments[row][1]:
        above.insert(0, comments[row][0])
        row -= 1
    beside = [
        comments[r][0] for r in range(node.lineno, (node.end_lineno or node.lineno) + 1) if r in comments
    ]
    return " ".join(c for c in [*above, *beside] if c and not _PRAGMA.match(c))


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """Field name → the comment that documents it in ``cls``'s own source (fields it declares)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent(source)  # a class nested in a function or class is indented
    comments = _source_comments(source)
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    return {
        node.target.id: comment
        for node in body.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and (comment := _statement_comment(node, comments))
    }


def element_comments(module: types.ModuleType, name: str) -> dict[str, str]:
    """The comment beside each string of the tuple or list assigned to ``name`` in ``module``."""
    source = inspect.getsource(module)
    comments = _source_comments(source)
    for node in ast.parse(source).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
            assert isinstance(value, ast.Tuple | ast.List), f"{name} is not a tuple or list"
            return {
                e.value: comments[e.lineno][0]
                for e in value.elts
                if isinstance(e, ast.Constant) and e.lineno in comments and not comments[e.lineno][1]
            }
    return {}


# -- run configuration ----------------------------------------------------------------------

_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string", typing.Any: "any value"}
_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _unwrap(annotation) -> tuple[object, list, str | None]:
    """(the type inside ``Annotated``, its constraints, its discriminator tag)."""
    metadata, tag = [], None
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for item in extra:
            if isinstance(item, Tag):
                tag = item.tag
            metadata += getattr(item, "metadata", None) or [item]
    return annotation, metadata, tag


def _is_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_union(annotation) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _nested(annotation, path: str) -> Iterator[tuple[type[BaseModel], str, str | None]]:
    """(model, key path, tag) of every settings model ``annotation`` holds, in order."""
    annotation, _, tag = _unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_model(annotation):
        yield annotation, path, tag
    elif _is_union(annotation):
        for arg in args:
            yield from _nested(arg, path)
    elif origin is dict:
        yield from _nested(args[1], f"{path}.<name>")
    elif origin in (list, tuple, set, frozenset) and args:
        yield from _nested(args[0], f"{path}[]")


class _Section:
    """A settings model's section of the page: the key paths it sits at, its discriminator tag."""

    def __init__(self, model: type[BaseModel], path: str, tag: str | None):
        self.model, self.paths, self.tag = model, [path], tag

    @property
    def anchor(self) -> str:
        return anchor("config", self.paths[0].replace("<name>", "name"), self.tag or "")

    @property
    def title(self) -> str:
        where = ", ".join(code(p) for p in self.paths)
        if self.tag is None:
            return where
        return f"{where} — {code(f'{_discriminator(self.model, self.tag)}: {self.tag}')}"


def _discriminator(model: type[BaseModel], tag: str) -> str:
    """The field whose ``Literal`` value is ``tag`` (``kind``)."""
    for name, field in model.model_fields.items():
        if typing.get_args(field.annotation) == (tag,):
            return name
    return "kind"


def _sections(root: type[BaseModel]) -> dict[tuple[type[BaseModel], str | None], _Section]:
    """The nested models of ``root``, depth first in field order, each once (with every path)."""
    found: dict[tuple[type[BaseModel], str | None], _Section] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            for sub, path, tag in _nested(field.annotation, prefix + name):
                key = (sub, tag)
                if key in found:
                    if path not in found[key].paths:
                        found[key].paths.append(path)
                    continue
                found[key] = _Section(sub, path, tag)
                walk(sub, path + ".")

    walk(root, "")
    return found


def _bounds(metadata: list) -> str:
    parts = []
    for item in metadata:
        for attribute, sign in _BOUNDS:
            if isinstance(item, getattr(annotated_types, attribute.title())):
                parts.append(f"{sign} {getattr(item, attribute)}")
        if isinstance(item, annotated_types.MinLen) and item.min_length:
            parts.append(f"length ≥ {item.min_length}")
        if isinstance(item, annotated_types.MaxLen):
            parts.append(f"length ≤ {item.max_length}")
        if getattr(item, "pattern", None):
            parts.append(f"matching {code(item.pattern)}")
    return f" ({', '.join(parts)})" if parts else ""


def _value(value: object) -> str:
    """A value as YAML flow text."""
    if isinstance(value, tuple | set | frozenset):
        value = list(value)
    if isinstance(value, Enum):
        value = value.value
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def _type(annotation, sections, metadata: list | None = None) -> str:
    annotation, inner, tag = _unwrap(annotation)
    bounds = _bounds([*(metadata or []), *inner])
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return ("one of " if len(args) > 1 else "") + ", ".join(code(_value(a)) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(code(_value(a)) for a in annotation)
    if _is_model(annotation):
        section = sections[(annotation, tag)]
        return f"[{code(tag) if tag else 'mapping'}](#{section.anchor})"
    if _is_union(annotation):
        options = [a for a in args if a is not type(None)]
        tags = [_unwrap(a)[2] for a in options]
        if all(tags) and all(_is_model(_unwrap(a)[0]) for a in options):
            key = _discriminator(_unwrap(options[0])[0], tags[0])
            shown = f"mapping chosen by {code(key)}: " + ", ".join(_type(a, sections) for a in options)
        else:
            shown = " or ".join(_type(a, sections) for a in options)
        return shown + (" or null" if len(options) < len(args) else "") + bounds
    if origin is dict:
        return f"mapping of {_type(args[0], sections)} to {_type(args[1], sections)}{bounds}"
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type(args[0], sections)}{bounds}" if args else "list"
    name = _SCALARS.get(annotation) or code(getattr(annotation, "__name__", str(annotation)))
    return name + bounds


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        # a block whose keys take their defaults; a discriminated block names its kind
        fixed = {
            name: getattr(value, name)
            for name, sub in type(value).model_fields.items()
            if typing.get_origin(sub.annotation) is typing.Literal
            and len(typing.get_args(sub.annotation)) == 1
        }
        return (code(_value(fixed)) + ", " if fixed else "") + "each key at its default"
    return code(_value(value))


def _description(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    if field.description:
        return prose(field.description)
    for cls in model.__mro__:
        if name in inspect.get_annotations(cls):
            return prose(field_comments(cls).get(name, ""))
    return ""


def _documented_configs(root: type[BaseModel]) -> list[dict]:
    """The run configs the documentation shows: every ```yaml block of the README and the site's
    pages whose top-level keys are all run-config keys (each is loaded as a run config by the
    tests, so its values are valid)."""
    from pathlib import Path

    docs = Path(__file__).resolve().parent
    # a copy of docs/ alone (as a test of the build makes) has no README beside it
    pages = [p for p in (docs.parent / "README.md", *sorted((docs / "site").rglob("*.md"))) if p.is_file()]
    found = []
    for page in pages:
        for block in re.findall(r"^```yaml\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M):
            try:
                doc = yaml.safe_load(textwrap.dedent(block))
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and doc and set(doc) <= set(root.model_fields):
                found.append(doc)
    return found


@functools.cache
def _examples() -> dict[tuple[type[BaseModel], str | None, str], object]:
    """(settings model, its discriminator tag, key) → the first value the documentation's configs
    give that key, found by walking each documented config along the models it fills."""
    from kebab_eval_pipeline.chain.settings import RunSettings

    out: dict[tuple[type[BaseModel], str | None, str], object] = {}

    def walk(model: type[BaseModel], tag: str | None, data: dict) -> None:
        for name, value in data.items():
            field = model.model_fields.get(name)
            if field is None:
                continue
            out.setdefault((model, tag, name), value)
            for sub, path, sub_tag in _nested(field.annotation, name):
                items = value.values() if path.endswith(".<name>") and isinstance(value, dict) else [value]
                if path.endswith("[]"):
                    items = value if isinstance(value, list) else []
                for item in items:
                    chosen = sub_tag is None or (
                        isinstance(item, dict) and item.get(_discriminator(sub, sub_tag)) == sub_tag
                    )
                    if isinstance(item, dict) and chosen:
                        walk(sub, sub_tag, item)

    for doc in _documented_configs(RunSettings):
        walk(RunSettings, None, doc)
    return out


def _example(model: type[BaseModel], tag: str | None, name: str) -> str:
    """The documented value of ``name`` as one line of YAML (``key: value``), or — when no
    documented config sets it; a block of keys of its own points to its table instead."""
    if (model, tag, name) not in _examples():
        return "—"
    if isinstance(_examples()[(model, tag, name)], dict) and any(
        _nested(model.model_fields[name].annotation, name)
    ):
        return "its keys' own examples, below"
    line = yaml.safe_dump(
        {name: _examples()[(model, tag, name)]}, default_flow_style=True, width=10**6, sort_keys=False
    ).strip()
    line = line.removeprefix("{").removesuffix("}")
    return code(line if len(line) <= 80 else line[:79] + "…")


def _model_table(model: type[BaseModel], prefix: str, sections, tag: str | None = None) -> str:
    rows = [
        (
            code(prefix + name),
            _type(field.annotation, sections, field.metadata),
            _default(field),
            _description(model, name) or "—",
            _example(model, tag, name),
        )
        for name, field in model.model_fields.items()
    ]
    return table(("key", "type", "default", "description", "example (from the documentation)"), rows)


def config() -> str:
    """Every key of the run config: the top level, then each nested block (each system kind's)."""
    from kebab_eval_pipeline.chain.settings import RunSettings

    sections = _sections(RunSettings)
    out = [
        "## Top level {#config-top-level}",
        "",
        paragraphs(RunSettings.__doc__),
        "",
        _model_table(RunSettings, "", sections),
    ]
    for section in sections.values():
        out += ["", f"## {section.title} {{#{section.anchor}}}", ""]
        doc = section.model.__dict__.get("__doc__")
        if doc:
            out += [paragraphs(doc), ""]
        out.append(_model_table(section.model, section.paths[0] + ".", sections, section.tag))
    return "\n".join(out) + "\n"


# -- command line -----------------------------------------------------------------------------


def command_tree():
    """The click command tree of ``kebab-eval`` (the one ``--help`` reads)."""
    import typer

    return typer.main.get_command(importlib.import_module("kebab_eval_pipeline.cli.main").app)


def commands() -> Iterator[tuple[str, object, object]]:
    """(full name, command, its context) of ``kebab-eval`` and every visible command below it, in
    the order ``--help`` lists them."""
    import typer

    def walk(command, name: str, parent) -> Iterator[tuple[str, object, object]]:
        ctx = typer.Context(command, info_name=name.rsplit(" ", 1)[-1], parent=parent)
        yield name, command, ctx
        for sub_name in command.list_commands(ctx) if hasattr(command, "list_commands") else ():
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, f"{name} {sub_name}", ctx)

    yield from walk(command_tree(), "kebab-eval", None)


def _help(command_help: str | None) -> str:
    """Click help text as markdown: ``\\f`` ends it, a ``\\b`` paragraph keeps its lines."""
    if not command_help:
        return ""
    blocks = []
    for block in inspect.cleandoc(command_help).partition("\f")[0].strip().split("\n\n"):
        if block.startswith("\b"):
            blocks.append("```text\n" + block.lstrip("\b").strip("\n") + "\n```")
        else:
            blocks.append(prose(" ".join(line.strip() for line in block.splitlines() if line.strip())))
    return "\n\n".join(blocks)


def cli() -> str:
    """Every command and group of ``kebab-eval``: help, usage, arguments and options."""
    out = ["Every command also takes `--help`, which prints the same help in the terminal."]
    for name, command, ctx in commands():
        out += ["", f"## {code(name)} {{#{anchor(name)}}}", "", _help(command.help), ""]
        out += ["```text", command.get_usage(ctx).removeprefix("Usage: "), "```"]
        subs = [
            (sub_name, sub)
            for sub_name in getattr(command, "list_commands", lambda ctx: [])(ctx)
            if (sub := command.get_command(ctx, sub_name)) is not None and not sub.hidden
        ]
        if subs:
            out += ["", "Commands:", ""]
            out += [
                f"- [{code(sub_name)}](#{anchor(name, sub_name)}): {prose(sub.get_short_help_str(limit=300))}"
                for sub_name, sub in subs
            ]
        rows = []
        for param in command.get_params(ctx):
            record = param.get_help_record(ctx) if not getattr(param, "hidden", False) else None
            if record is None or param.name == "help":
                continue
            if getattr(param, "is_flag", False):  # no value to show (typer labels flags <bool>)
                shown = " / ".join(", ".join(opts) for opts in (param.opts, param.secondary_opts) if opts)
            else:
                shown = record[0]
            rows.append((code(shown), prose(record[1]) or "—"))
        if rows:
            out += ["", table(("argument or option", "description"), rows)]
    return "\n".join(out) + "\n"


# -- exit codes -------------------------------------------------------------------------------


def exit_codes() -> str:
    """The exit codes of ``kebab-eval`` and what each means."""
    from kebab_eval_pipeline.foundation.errors import EXIT_CODES

    return (
        table(("code", "meaning"), [(code(int(c)), prose(meaning)) for c, meaning in EXIT_CODES.items()])
        + "\n"
    )


# -- stored files ------------------------------------------------------------------------------


def _doc_with_literals(doc: str) -> str:
    """A docstring as markdown whose ``::`` literal blocks (reST) become text code blocks."""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        if out and out[-1].endswith("::") and block.startswith("    "):
            out[-1] = out[-1][:-1]  # "…::" reads "…:" before its block
            out.append("```text\n" + textwrap.dedent(block) + "\n```")
        else:
            out.append(block)
    return "\n\n".join(
        part if part.startswith("```") else paragraphs(part).replace("\\:", ":") for part in out
    )


def _artifact_summary(artifact: type) -> str:
    """The first paragraph of an artifact class's docstring. A dataclass without one gets its
    signature as ``__doc__``, which would read as a description: that stops the build, naming it."""
    doc = artifact.__dict__.get("__doc__") or ""
    if not doc.strip() or doc.startswith(f"{artifact.__name__}("):
        raise ValueError(
            f"{artifact.__module__}.{artifact.__name__} has no docstring for the stored-files page"
        )
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def storage() -> str:
    """Where runs are stored: the storage base (``foundation.location.default_storage_base``), the
    paths under it (``store.layout``), and what each asset of the chain stores
    (``chain.artifacts.STAGES``)."""
    from kebab_eval_pipeline.chain.artifacts import STAGES
    from kebab_eval_pipeline.foundation import location
    from kebab_eval_pipeline.store import layout as store_layout

    rows = [
        (
            code(stage.asset),
            code(stage.tag),
            _artifact_summary(stage.artifact),
            "yes" if stage.stored_run else "no",
            ", ".join(code(c) for c in stage.checks) or "—",
        )
        for stage in STAGES
    ]
    return (
        "\n".join(
            [
                "## The storage base {#storage-base}",
                "",
                paragraphs(location.default_storage_base.__doc__),
                "",
                paragraphs(location.run_storage.__doc__),
                "",
                "## Under the base {#storage-paths}",
                "",
                _doc_with_literals(store_layout.__doc__),
                "",
                "## What each asset stores {#storage-assets}",
                "",
                "Each asset of the chain is a folder under the base, one run id per folder below it, in"
                " the order the chain makes them. *Part of a stored run*: what reading a stored run (a"
                " comparison, `history`, a sweep's ranking) needs; a run without it is incomplete.",
                "",
                table(
                    ("asset", "stage tag", "what it holds", "part of a stored run", "asset checks"),
                    [(a, t, prose(w), r, c) for a, t, w, r, c in rows],
                ),
            ]
        )
        + "\n"
    )


# -- the package's layout ---------------------------------------------------------------------


def _first_paragraph(path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.strip().split("\n\n", 1)[0].split())
    # a paragraph that introduces what follows it in the docstring (a reST "::" or ":") ends here
    return re.sub(r":+$", ".", first)


def layout() -> str:
    """The package in the order of its layers (``kebab_eval_pipeline.layers.LAYERS``, lowest first):
    the layers as a list, then every package — each with the first paragraph of its docstring and a
    table of its modules with theirs, its subpackages right after it."""
    from pathlib import Path

    import kebab_eval_pipeline
    from kebab_eval_pipeline.layers import IGNORED, LAYERS

    root = Path(kebab_eval_pipeline.__file__).parent

    def label(entry: str) -> str:
        """A layer's entry, linked to the section of the package that holds it."""
        path = root.joinpath(*entry.split("."))
        shown = f"{path.relative_to(root).as_posix()}/" if path.is_dir() else f"{path.relative_to(root)}.py"
        package = path if path.is_dir() else path.parent
        return f"[{code(shown)}](#{anchor(package.relative_to(root.parent).as_posix() + '/')})"

    out = ["The layers, lowest first (a module imports only its own layer and those before it):", ""]
    out += [
        f"{n}. " + ", ".join(label(e) for e in layer if e != "__init__") for n, layer in enumerate(LAYERS, 1)
    ]
    order = [root]
    for layer in LAYERS:
        for entry in layer:
            top = root / entry.split(".")[0]
            if top.is_dir() and top not in order:
                order += sorted(
                    (p.parent for p in top.rglob("__init__.py") if "__pycache__" not in p.parts),
                    key=lambda p: p.relative_to(top).parts,
                )
    unplaced = {p for p in root.iterdir() if (p / "__init__.py").is_file() and p.name not in IGNORED} - set(
        order
    )
    if unplaced:  # a package the layers do not name would be left off the page: stop the build
        raise ValueError(
            f"packages in no layer of kebab_eval_pipeline/layers.py: {sorted(p.name for p in unplaced)}"
        )
    for package in order:
        name = package.relative_to(root.parent).as_posix() + "/"
        out += ["", f"## {code(name)} {{#{anchor(name)}}}", ""]
        about = _first_paragraph(package / "__init__.py")
        if about:
            out += [prose(about), ""]
        rows = [
            (code(module.name), prose(_first_paragraph(module)) or "—")
            for module in sorted(package.glob("*.py"))
            if module.name != "__init__.py"
        ]
        out += [table(("module", "what it is"), rows)]
    return "\n".join(out) + "\n"


#: Generated reference by marker name (``<!-- generated: NAME -->`` in a page).
PAGES: dict[str, Callable[[], str]] = {
    "metrics": metrics,
    "config": config,
    "cli": cli,
    "exit-codes": exit_codes,
    "layout": layout,
    "storage": storage,
}
