"""Seeded generators of hostile inputs for the CLI fuzz harness (issue 22).

A case is a pure function of ``(seed, family, index)``: :func:`make_case` draws everything from
``random.Random(f"{seed}:{family}:{index}")``, so a failure reproduces by its id (``golden-0042``)
whatever the number of cases asked for. The mutation of case ``index`` is
``MUTATIONS[family][index % len(...)]`` — a small run still covers every class — and the generator
picks its parameters (format, which query, which value).

Families:

* ``golden`` — a golden file in one of the formats read (canonical YAML/JSON/JSONL, kebab list,
  support-anchor, WFGY, ckv), mutated, through ``kebab-eval golden validate``;
* ``golden-run`` — a benign golden mutation through a whole ``kebab-eval run`` (replay system);
* ``config`` — a run config mutated, run against a good golden file and a good replay trace;
* ``trace`` — a replay trace (kebab ``per_query.jsonl``) mutated, run with a good golden file;
* ``special`` — a FIFO and ``/dev/zero`` as golden file and as trace, with a 10 MiB input limit.

Each case declares what it expects: :data:`REFUSE` for the defects issue 22 (or the golden-set
validation rules) say the tool must catch; :data:`EITHER` for benign or ambiguous mutations;
:data:`FLAG` for impossible replay numbers, which may be refused or dropped for their query only
(stored as null); :data:`READ` for valid input a user's tools write, which must not be refused.
Text written into files may hold ``{dir}``, replaced by the case folder.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

REFUSE = "refuse"  # exit 2 naming the input; a run (exit 0/1) is a failure
EITHER = "either"  # exit 2 naming the input, or a correct run
FLAG = "refuse-or-flag"  # exit 2, or a correct run where the impossible value is stored as null
READ = "read"  # a correct run or conversion: the input is valid, a refusal is wrong (issue 44)

WORDS = ["kimchi", "bulgogi", "sourdough starter", "miso", "yogurt incubation", "kombucha", "natto", "kefir"]


@dataclass
class Case:
    """One generated input and what a correct outcome looks like.

    ``args`` are the CLI arguments after ``kebab-eval`` (``{dir}`` = the case folder); ``blame``
    lists strings of which a clean refusal's stderr must contain one (whitespace ignored: the
    console wraps long lines); ``queries`` / ``query_ids`` are what a clean run must have stored
    (None: not known, e.g. a truncated file); ``latencies`` maps a query id to the retrieval_ms
    a clean run must store for it (None: must be null — the value was impossible or missing).
    """

    id: str
    kind: str
    command: str  # "validate" | "run"
    expect: str
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    blame: list[str] = field(default_factory=list)
    queries: int | None = None
    query_ids: list[str] | None = None
    latencies: dict[str, float | None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    trec: bool = False  # also `export --format trec` and check every line has six fields
    markdown: bool = False  # check run.md shows no raw HTML, heading or table cell from the input
    note: str = ""
    # Issue 44's families (see tests/fuzz/harness.py for how each is judged):
    check: str = ""  # a family's own verdict: "convert", "process-end", "sigint", "dup-support", …
    links: dict[str, str] = field(default_factory=dict)  # symlink name -> target (in the folder)
    secrets: list[str] = field(default_factory=list)  # any of these in any output or file: a leak
    server: bool = False  # needs the echo server of tests/fuzz/echo_server.py ("{port}" in files)
    # SIGINT this many seconds after the start (or after the file anchor appears), to "group"/"pid"
    interrupt: tuple[float, str, str | None] | None = None
    tmpfs: dict[str, int] = field(default_factory=dict)  # folder name -> size of a tmpfs mounted there
    after: list[list[str]] = field(default_factory=list)  # commands run after a run exiting 0/1
    must_say: list[str] = field(default_factory=list)  # every one in a refusal (case-insensitive)
    expected: dict[str, Any] = field(default_factory=dict)  # check-specific expectations
    storage: str | None = None  # the run's storage base ({dir}); default DAGSTER_HOME/kebab-eval/…

    @property
    def run_id(self) -> str:
        return f"fz-{self.id}"


# ---------------------------------------------------------------------------------------------
# golden sets: a small valid set (canonical dicts), rendered in any format
# ---------------------------------------------------------------------------------------------

FORMATS = [
    "canonical-yaml",
    "canonical-json",
    "canonical-jsonl",
    "kebab-yaml",
    "supports-yaml",
    "supports-jsonl",
    "wfgy-jsonl",
    "ckv-yaml",
]
RUN_FORMATS = ["canonical-yaml", "canonical-json", "canonical-jsonl", "kebab-yaml"]  # doc-id matching
SUFFIX = {"yaml": ".yaml", "json": ".json", "jsonl": ".jsonl"}


def base_queries(rng: random.Random, n: int | None = None) -> list[dict[str, Any]]:
    """``n`` (3–6) canonical queries ``q1…``; each answerable one is supported by ``d<i>.md``, the
    last may be unanswerable."""
    n = n or rng.randint(3, 6)
    queries = []
    for i in range(1, n + 1):
        q: dict[str, Any] = {"id": f"q{i}", "query": f"{rng.choice(WORDS)} {i}?"}
        if i == n and rng.random() < 0.5:
            q["answerable"] = False
        else:
            q["supports"] = [{"doc_id": f"d{i}.md"}]
        queries.append(q)
    return queries


def _doc(q: dict) -> str | None:
    return q["supports"][0].get("doc_id") if q.get("supports") else None


def render(fmt: str, queries: list[dict], rng: random.Random) -> str:
    """``queries`` (canonical dicts) as the text of a golden file in ``fmt``."""
    dump = lambda doc: yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=10**9)  # noqa: E731
    if fmt.startswith("canonical"):
        doc = {"schema_version": "1", "name": "fuzz", "queries": queries}
        if fmt == "canonical-yaml":
            return dump(doc)
        if fmt == "canonical-json":
            return json.dumps(doc, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5)
        return "".join(json.dumps(q, ensure_ascii=rng.random() < 0.5) + "\n" for q in queries)
    if fmt == "kebab-yaml":
        rows = [
            {"id": q["id"], "query": q["query"], "expected_doc_ids": [d] if (d := _doc(q)) else []}
            for q in queries
        ]
        return dump(rows)
    if fmt.startswith("supports"):
        rows = [
            {
                "id": q["id"],
                "question": q["query"],
                "answerable": q.get("answerable", True),
                "gold_supports": [{"rel_path": d, "heading_path": ["H"]}] if (d := _doc(q)) else [],
            }
            for q in queries
        ]
        if fmt == "supports-yaml":
            return dump(rows)
        return "".join(json.dumps(r) + "\n" for r in rows)
    if fmt == "wfgy-jsonl":
        rows = [
            {
                "qid": q["id"],
                "question": q["query"],
                "answerable": q.get("answerable", True),
                "gold_claim_substr": ["the answer is here"] if _doc(q) else [],
                "gold_citations": [f"{d}#1"] if (d := _doc(q)) else [],
            }
            for q in queries
        ]
        return "".join(json.dumps(r) + "\n" for r in rows)
    if fmt == "ckv-yaml":
        rows = [
            {
                "id": q["id"],
                "intent": q["query"],
                "expected": {"file": f"src/{q['id']}.go", "line_range": [3, 9]},
            }
            for q in queries
        ]
        return dump({"schema_version": "1", "queries": rows})
    raise ValueError(fmt)


def golden_name(case_id: str, fmt: str) -> str:
    return f"g-{case_id}{SUFFIX[fmt.rsplit('-', 1)[1]]}"


# ---------------------------------------------------------------------------------------------
# golden mutations: (rng, queries, fmt) -> (text or bytes, expect, queries count or None, fmt, note)
# ---------------------------------------------------------------------------------------------

Mutated = tuple[str | bytes, str, int | None, str, str]


def _pick_fmt(rng: random.Random, allowed: list[str]) -> str:
    return rng.choice(allowed)


def g_plain(rng, qs, fmt) -> Mutated:
    return render(fmt, qs, rng), EITHER, len(qs), fmt, "unchanged"


def g_bom(rng, qs, fmt) -> Mutated:
    return "\ufeff" + render(fmt, qs, rng), EITHER, len(qs), fmt, "UTF-8 BOM"


def g_crlf(rng, qs, fmt) -> Mutated:
    return render(fmt, qs, rng).replace("\n", "\r\n"), EITHER, len(qs), fmt, "CRLF line ends"


def g_unicode_ids(rng, qs, fmt) -> Mutated:
    for i, q in enumerate(qs):
        q["id"] = rng.choice(["é-{}", "鍋{}", "🥟{}", "Ωmega-{}", "ид{}"]).format(i)
    return render(fmt, qs, rng), EITHER, len(qs), fmt, "non-ASCII ids"


WS = [" ", "\t", "\n", "\r", "\x01", "\x7f", "\u2028", "\u00a0", "\x0b"]


def g_ws_id(rng, qs, fmt) -> Mutated:
    ch = rng.choice(WS)
    q = rng.choice(qs)
    q["id"] = f"{q['id']}{ch}x"
    return render(fmt, qs, rng), EITHER, len(qs), fmt, f"id with {ch!r}"


def g_huge_string(rng, qs, fmt) -> Mutated:
    # A marker replaced after rendering: PyYAML's pure-Python emitter takes seconds on 2 MB.
    rng.choice(qs)["query"] = "HUGE_MARKER"
    huge = "kimchi-" * rng.choice([150_000, 300_000])
    return render(fmt, qs, rng).replace("HUGE_MARKER", huge), EITHER, len(qs), fmt, "1-2 MB query text"


def g_unknown_top(rng, qs, fmt) -> Mutated:
    text = render("canonical-yaml", qs, rng) + "curated_by: fuzz\n"
    return text, EITHER, len(qs), "canonical-yaml", "unknown top-level field"


def g_truncated(rng, qs, fmt) -> Mutated:
    raw = render(fmt, qs, rng).encode()
    cut = rng.randrange(1, len(raw))
    return raw[:cut], EITHER, None, fmt, f"truncated at byte {cut}"


def g_mangled(rng, qs, fmt) -> Mutated:
    raw = bytearray(render(fmt, qs, rng).encode())
    ops = []
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(raw))
        op = rng.choice(["flip", "insert", "delete", "dup"])
        if op == "flip":
            raw[at] = rng.choice(b"{}[]:,\"'-#&*!| \n\x00\xff\x80aZ9")
        elif op == "insert":
            raw[at:at] = rng.choice([b":", b"- ", b"{", b"]", b"\n  ", b'"', b"\t", b"\xc3"])
        elif op == "delete":
            del raw[at : at + rng.randint(1, 8)]
        else:
            raw[at:at] = raw[at : at + rng.randint(1, 40)]
        ops.append(f"{op}@{at}")
    return bytes(raw), EITHER, None, fmt, "mangled " + ",".join(ops)


def g_nul(rng, qs, fmt) -> Mutated:
    text = render(fmt, qs, rng)
    at = rng.randrange(1, len(text) - 1)
    return text[:at] + "\x00" + text[at:], REFUSE, None, fmt, f"NUL byte at {at}"


def g_not_utf8(rng, qs, fmt) -> Mutated:
    raw = render(fmt, qs, rng).encode()
    how = rng.choice(["ff", "latin1", "surrogate-bytes", "utf16"])
    if how == "utf16":
        return render(fmt, qs, rng).encode("utf-16"), REFUSE, None, fmt, "UTF-16 with BOM"
    bad = {"ff": b"\xff\xfe", "latin1": "é".encode("latin-1"), "surrogate-bytes": b"\xed\xa0\x80"}[how]
    at = raw.index(b"?")  # inside the first query text
    return raw[:at] + bad + raw[at:], REFUSE, None, fmt, f"not UTF-8 ({how})"


def g_lone_surrogate(rng, qs, fmt) -> Mutated:
    # A JSON escape, so the file itself is valid UTF-8 and the parsed text holds an unpaired
    # surrogate. (YAML cannot carry one: libyaml refuses the escape, and the bytes are not UTF-8.)
    fmt = rng.choice(["canonical-json", "canonical-jsonl", "supports-jsonl", "wfgy-jsonl"])
    escape = rng.choice(["\\ud800", "\\udc00", "\\udbff"])
    where = rng.choice(["query", "id", "tag"])
    if where == "tag" and fmt.startswith("canonical"):
        qs[0]["tags"] = ["SURROGATE"]
    elif where == "id":
        qs[0]["id"] = "q1SURROGATE"
    else:
        where = "query"
        qs[0]["query"] += "SURROGATE"
    text = render(fmt, qs, rng)
    return text.replace("SURROGATE", escape), REFUSE, None, fmt, f"JSON {escape} in {where}"


def g_empty(rng, qs, fmt) -> Mutated:
    raw = rng.choice(
        [b"", b"\n\n", b"   ", b"---\n", b"# only a comment\n", b"[]", b"{}", b"null", b"\xef\xbb\xbf"]
    )
    return raw, REFUSE, None, fmt, f"empty: {raw!r}"


def g_alias_bomb(rng, qs, fmt) -> Mutated:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, rng.choice([7, 9])):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    text = "\n".join(lines) + f"\nqueries: [{{id: q1, query: x, tags: *a{len(lines) - 1}}}]\n"
    return text, REFUSE, None, "canonical-yaml", f"alias bomb, {len(lines)} levels"


def g_dup_key(rng, qs, fmt) -> Mutated:
    how = rng.choice(["yaml-queries", "yaml-query", "yaml-id", "json-queries", "jsonl-id", "kebab-id"])
    if how == "yaml-queries":
        text = render("canonical-yaml", qs, rng) + "queries:\n- id: z1\n  query: only this one?\n"
        return text, REFUSE, None, "canonical-yaml", "two queries: blocks"
    if how in ("yaml-query", "yaml-id"):
        key = how.split("-")[1]
        lines = render("canonical-yaml", qs, rng).split("\n")
        i = next(
            n
            for n, line in enumerate(lines)
            if line.startswith(f"  {key}: ") or line.startswith(f"- {key}: ")
        )
        lines.insert(i + 1, f"  {key}: other")
        return "\n".join(lines), REFUSE, None, "canonical-yaml", f"duplicate {key} in a query"
    if how == "json-queries":
        doc = json.dumps({"schema_version": "1", "queries": qs})
        return doc[:-1] + ', "queries": []}', REFUSE, None, "canonical-json", "two queries keys (JSON)"
    if how == "jsonl-id":
        text = render("canonical-jsonl", qs, rng)
        return (
            text.replace('{"id": "q1"', '{"id": "q1", "id": "b"', 1),
            REFUSE,
            None,
            "canonical-jsonl",
            "dup id",
        )
    text = render("kebab-yaml", qs, rng).replace("- id: q1\n", "- id: q1\n  id: q9\n", 1)
    return text, REFUSE, None, "kebab-yaml", "duplicate id in a kebab entry"


BIG = [2**63, 2**64, 10**30, -(2**63) - 1]


def g_bigint(rng, qs, fmt) -> Mutated:
    big = rng.choice(BIG)
    where = rng.choice(["grade", "line_start", "line_end", "line_range"])
    q = next(q for q in qs if q.get("supports"))
    if where == "line_range":
        text = render("ckv-yaml", qs, rng)
        # the renderer writes block sequences ("line_range:\n    - 3\n    - 9"): swap the first end
        mutated = text.replace("    - 3\n    - 9\n", f"    - 1\n    - {big}\n", 1)
        assert mutated != text, "the ckv renderer no longer writes line_range as a block sequence"
        return mutated, REFUSE, None, "ckv-yaml", f"ckv line_range [1, {big}]"
    support = q["supports"][0]
    support.update({"line_start": 1, "line_end": 5} if where != "grade" else {})
    support[where] = big
    fmt = rng.choice(["canonical-yaml", "canonical-json", "canonical-jsonl"])
    return render(fmt, qs, rng), REFUSE, None, fmt, f"{where} = {big}"


def g_deep(rng, qs, fmt) -> Mutated:
    depth = rng.choice([1_200, 5_000, 50_000])
    fmt = rng.choice(["canonical-yaml", "canonical-json", "canonical-jsonl"])
    marker = "DEEP_MARKER"
    qs[0]["tags"] = marker
    text = render(fmt, qs, rng)
    deep = "[" * depth + "]" * depth
    return text.replace(f'"{marker}"', deep).replace(marker, deep), REFUSE, None, fmt, f"tags nested {depth}"


def g_invalid(rng, qs, fmt) -> Mutated:
    q = qs[0]
    how = rng.choice(
        [
            "dup-ids",
            "empty-query",
            "blank-query",
            "lines-reversed",
            "lines-zero",
            "id-list",
            "query-map",
            "answerable-text",
            "grade-text",
            "schema-major",
        ]
    )
    if how == "dup-ids":
        qs[1]["id"] = q["id"]
    elif how == "empty-query":
        q["query"] = ""
    elif how == "blank-query":
        q["query"] = "   "
    elif how in ("lines-reversed", "lines-zero"):
        q.setdefault("supports", [{"doc_id": "d1.md"}])[0].update(
            {"line_start": 9, "line_end": 3} if how == "lines-reversed" else {"line_start": 0, "line_end": 0}
        )
    elif how == "id-list":
        q["id"] = [1, 2]
    elif how == "query-map":
        q["query"] = {"text": "x"}
    elif how == "answerable-text":
        q["answerable"] = "maybe"
    elif how == "grade-text":
        q.setdefault("supports", [{"doc_id": "d1.md"}])[0]["grade"] = "high"
    fmt = rng.choice(["canonical-yaml", "canonical-json", "canonical-jsonl"])
    if how == "schema-major":
        fmt = rng.choice(["canonical-yaml", "canonical-json"])
        text = render(fmt, qs, rng).replace('"1"', '"9"', 1).replace("'1'", "'9'", 1)
        return text, REFUSE, None, fmt, how
    return render(fmt, qs, rng), REFUSE, None, fmt, how


GOLDEN_MUTATIONS: list[tuple[str, Callable[..., Mutated]]] = [
    ("plain", g_plain),
    ("dup-key", g_dup_key),
    ("bom", g_bom),
    ("lone-surrogate", g_lone_surrogate),
    ("bigint", g_bigint),
    ("crlf", g_crlf),
    ("ws-id", g_ws_id),
    ("deep-nesting", g_deep),
    ("truncated", g_truncated),
    ("nul-byte", g_nul),
    ("unicode-ids", g_unicode_ids),
    ("not-utf8", g_not_utf8),
    ("mangled", g_mangled),
    ("empty", g_empty),
    ("huge-string", g_huge_string),
    ("alias-bomb", g_alias_bomb),
    ("invalid", g_invalid),
    ("unknown-top-field", g_unknown_top),
]
MARKUP = (
    "<script>alert(1)</script> <svg onload=alert(2)> | injected-col |\n# Injected [link](http://x.invalid)"
)


def g_markup(rng, qs, fmt) -> Mutated:
    # Issue 22 item 12: set name and category go into run.md; a clean run escapes them (checked).
    fmt = rng.choice(["canonical-yaml", "canonical-json"])
    for q in qs:
        q["category"] = rng.choice(["cat", "x"]) + " " + MARKUP
    text = (
        render(fmt, qs, rng)
        .replace('"fuzz"', json.dumps(MARKUP), 1)
        .replace("name: fuzz", f"name: {json.dumps(MARKUP)}", 1)
    )
    return text, EITHER, len(qs), fmt, "Markdown/HTML in name and category"


# The benign mutations whose run is checked end to end (stored rows, ids, metrics).
GOLDEN_RUN_MUTATIONS = [
    ("plain", g_plain),
    ("bom", g_bom),
    ("crlf", g_crlf),
    ("unicode-ids", g_unicode_ids),
    ("ws-id", g_ws_id),
    ("huge-string", g_huge_string),
    ("markup", g_markup),
]


def _bytes(text: str | bytes) -> bytes:
    # surrogatepass: a generator may put a raw surrogate into text on purpose (never the escapes)
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def golden_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind, mutate = GOLDEN_MUTATIONS[index % len(GOLDEN_MUTATIONS)]
    qs = base_queries(rng)
    content, expect, count, fmt, note = mutate(rng, qs, _pick_fmt(rng, FORMATS))
    name = golden_name(case_id, fmt)
    return Case(
        id=case_id,
        kind=f"golden/{kind}",
        command="validate",
        expect=expect,
        files={name: _bytes(content)},
        args=["golden", "validate", f"{{dir}}/{name}"],
        blame=[name],
        queries=count,
        note=f"{fmt}: {note}",
    )


# ---------------------------------------------------------------------------------------------
# replay traces and run configs
# ---------------------------------------------------------------------------------------------


def trace_rows(rng: random.Random, qs: list[dict]) -> list[dict[str, Any]]:
    """One kebab per_query record per query: the supporting doc at rank 1 or 2, a latency."""
    rows = []
    for q in qs:
        hits = [{"chunk_id": f"x{q['id']}#1", "doc_id": "unrelated.md", "rank": 1}]
        if d := _doc(q):
            hits.insert(rng.randint(0, 1), {"chunk_id": f"{d}#1", "doc_id": d, "rank": 0})
        for rank, hit in enumerate(hits, 1):
            hit["rank"] = rank
        rows.append({"query_id": q["id"], "hits": hits, "latency_ms": float(rng.randint(3, 900))})
    return rows


def jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def config_text(golden: str, trace: str, extra: str = "") -> str:
    """A run config scoring ``trace`` (replay) against ``golden``, paths in the case folder."""
    g, t = json.dumps(f"{{dir}}/{golden}"), json.dumps(f"{{dir}}/{trace}")
    return f"golden: {g}\nbaseline: none\nsystem:\n  kind: replay\n  path: {t}\n{extra}"


def run_case(
    case_id: str,
    kind: str,
    expect: str,
    qs: list[dict],
    golden: tuple[str, bytes],
    trace: tuple[str, bytes],
    config: str,
    note: str,
    **kw: Any,
) -> Case:
    cfg_name = f"c-{case_id}.yaml"
    files = {golden[0]: golden[1], trace[0]: trace[1], cfg_name: _bytes(config)}
    kw.setdefault("blame", [cfg_name])
    return Case(
        id=case_id,
        kind=kind,
        command="run",
        expect=expect,
        files=files,
        args=[
            "run",
            "--config",
            f"{{dir}}/{cfg_name}",
            "--run-id",
            f"fz-{case_id}",
            *kw.pop("extra_args", []),
        ],
        queries=kw.pop("queries", len(qs)),
        query_ids=kw.pop("query_ids", [q["id"] for q in qs]),
        note=note,
        **kw,
    )


def golden_run_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind, mutate = GOLDEN_RUN_MUTATIONS[index % len(GOLDEN_RUN_MUTATIONS)]
    qs = base_queries(rng)
    content, expect, _count, fmt, note = mutate(rng, qs, _pick_fmt(rng, RUN_FORMATS))
    rows = trace_rows(rng, qs)
    gname, tname = golden_name(case_id, fmt), f"t-{case_id}.jsonl"
    config, extra_args = config_text(gname, tname), []
    if rng.random() < 0.5:  # the golden file from the command line instead of the config
        config = config.split("\n", 1)[1]
        extra_args = ["--golden", f"{{dir}}/{gname}"]
    return run_case(
        case_id,
        f"golden-run/{kind}",
        expect,
        qs,
        (gname, _bytes(content)),
        (tname, jsonl(rows).encode()),
        config,
        f"{fmt}: {note}",
        extra_args=extra_args,
        blame=[gname],
        latencies={r["query_id"]: r["latency_ms"] for r in rows},
        trec=kind == "ws-id",
        markdown=kind == "markup",
    )


def _good_inputs(case_id: str, rng: random.Random):
    qs = base_queries(rng)
    gname, tname = f"g-{case_id}.yaml", f"t-{case_id}.jsonl"
    rows = trace_rows(rng, qs)
    return qs, rows, (gname, render("canonical-yaml", qs, rng).encode()), tname


HTTP_BAD = [
    ("search_url", "http://127.0.0.1:99999/search"),
    ("search_url", "http://[::1/search"),
    ("search_url", "http://[zz::1]:8080/search"),
    ("search_url", "http://127.0.0.1:-1/search"),
    ("headers", {"X-Api": "a\r\nInjected: 1"}),
    ("headers", {"X Api": "v"}),
    ("headers", {"X-Api\n": "v"}),
]
CONFIG_WRONG_TYPES = [
    'k: "abc"',
    "k: [-3]",
    "k: [1, x]",
    "mrr_cutoff: x",
    "answers: maybe",
    "system: [1, 2]",
    "gates: {mrr: {min: high}}",
    "gates: [1]",
    "match: everything",
    "baseline: [1]",
    "stale_golden: sometimes",
]
STORAGE_BAD = [
    "memory://fuzz",
    "/dev/null",
    "/dev/null/x",
    "/proc/kebab-fuzz",
    "foo://bar/x",
    "http://127.0.0.1:9/x",
    "ftp://example.invalid/x",
]


def config_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind = CONFIG_MUTATIONS[index % len(CONFIG_MUTATIONS)]
    qs, rows, golden, tname = _good_inputs(case_id, rng)
    trace = (tname, jsonl(rows).encode())
    latencies = {r["query_id"]: r["latency_ms"] for r in rows}
    cfg = config_text(golden[0], tname)
    cfg_name = f"c-{case_id}.yaml"
    # A clean refusal names the config file, or the field when that is distinctive (never "k").
    expect, note, blame, extra_args = REFUSE, kind, [cfg_name], []
    if kind == "dup-gates":
        cfg = "gates:\n  mrr: {min: 0.99}\n" + cfg + rng.choice(["gates: {}\n", "gates:\n"])
    elif kind == "dup-system-kind":
        cfg = cfg.replace(
            "  kind: replay\n", f"  kind: {rng.choice(['http', 'command', 'reference'])}\n  kind: replay\n"
        )
    elif kind == "dup-top-key":
        key = rng.choice(
            ["baseline: previous\n", f"golden: {json.dumps('{dir}/' + golden[0])}\n", "k: [1]\n"]
        )
        cfg = key + cfg + key
        note = f"duplicate {key.split(':')[0]}"
    elif kind == "compare-seed":
        seed = rng.choice(["1e40", str(10**40), ".nan", "1.5", "-1e40"])
        cfg += f"compare:\n  seed: {seed}\n"
        note, blame = f"compare.seed: {seed}", [cfg_name, "compare.seed"]
    elif kind == "storage":
        where = rng.choice(STORAGE_BAD)
        cfg += f"storage: {json.dumps(where)}\n"
        note, blame = f"storage: {where}", [cfg_name, "storage"]
    elif kind == "storage-empty":
        cfg += 'storage: ""\n'
        expect, note = EITHER, "storage '' (refused, or the artifacts under the default storage)"
    elif kind == "golden-empty":
        if rng.random() < 0.5:
            cfg = cfg.replace(f"golden: {json.dumps('{dir}/' + golden[0])}", 'golden: ""')
            blame.append("field 'golden'")
        else:
            extra_args, note, blame = ["--golden", ""], "--golden ''", [cfg_name, "--golden"]
    elif kind == "wrong-type":
        line = rng.choice(CONFIG_WRONG_TYPES)
        cfg += line + "\n"
        note = line
    elif kind == "http":
        key, value = rng.choice(HTTP_BAD)
        block = {"kind": "http", "search_url": "http://127.0.0.1:9/search"}
        block[key] = value
        cfg = config_text(golden[0], tname).split("system:")[0] + "system: " + json.dumps(block) + "\n"
        note, blame = f"http {key}: {value!r}", [cfg_name, key]
    elif kind == "judge-model-path":
        cfg += "answers: true\njudge: {backend: local, model: /etc/passwd}\n"
        blame += ["judge.model", "/etc/passwd"]
    elif kind == "source-root":
        root = rng.choice(["memory://fuzz", "foo://x", "/dev/null"])
        cfg += f"source_root: {json.dumps(root)}\n"
        note, blame = f"source_root: {root}", [cfg_name, "source_root"]
    elif kind == "unknown-key":
        cfg += rng.choice(["systen: {}\n", "gate: {mrr: {min: 0.1}}\n", "storage_path: /tmp/x\n"])
    elif kind == "alias-bomb":
        cfg += "x0: &x0 [a, a, a, a, a, a, a, a, a]\n" + "".join(
            f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]\n" for i in range(1, 8)
        )
    elif kind == "not-utf8":
        case = run_case(case_id, f"config/{kind}", REFUSE, qs, golden, trace, cfg, note, blame=blame)
        case.files[cfg_name] = cfg.encode().replace(b"baseline: none", b"baseline: n\xffone")
        return case
    elif kind in ("gate-pass", "gate-fail"):
        cfg += "gates:\n  mrr: {min: %s}\n" % ("0" if kind == "gate-pass" else "1.01")
        expect = EITHER
    elif kind == "crlf":
        cfg, expect = cfg.replace("\n", "\r\n"), EITHER
    elif kind == "bom":
        cfg, expect = "\ufeff" + cfg, EITHER
    elif kind == "k-list":
        cfg, expect = cfg + f"k: {rng.choice(['[1, 2]', '[5]', '[1, 3, 10, 50]'])}\n", EITHER
    return run_case(
        case_id,
        f"config/{kind}",
        expect,
        qs,
        golden,
        trace,
        cfg,
        note,
        blame=blame,
        latencies=latencies,
        extra_args=extra_args,
    )


CONFIG_MUTATIONS = [
    "dup-gates",
    "compare-seed",
    "storage",
    "gate-pass",
    "http",
    "dup-system-kind",
    "wrong-type",
    "golden-empty",
    "storage-empty",
    "source-root",
    "crlf",
    "dup-top-key",
    "judge-model-path",
    "unknown-key",
    "alias-bomb",
    "not-utf8",
    "bom",
    "gate-fail",
    "k-list",
]


def trace_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind = TRACE_MUTATIONS[index % len(TRACE_MUTATIONS)]
    qs, rows, golden, tname = _good_inputs(case_id, rng)
    latencies: dict[str, float | None] = {r["query_id"]: r["latency_ms"] for r in rows}
    expect, note = EITHER, kind
    victim = rng.choice(rows)
    text: str | None = None
    if kind == "latency-impossible":
        value = rng.choice(
            ["-453", "-0.5", "1e308", '"12"', "NaN", "Infinity", "-Infinity", "9" * 400, "true"]
        )
        targets = rows if value == "1e308" else [victim]  # 1e308 each: their sum is inf
        for r in targets:
            r["latency_ms"] = "@LAT@"
            latencies[r["query_id"]] = None
        text = jsonl(rows).replace('"@LAT@"', value)
        expect, note = FLAG, f"latency_ms {value} ({len(targets)} queries)"
    elif kind == "latency-split":
        victim["latency_ms"] = {"retrieval": 7.5, "answer": None}
        latencies[victim["query_id"]] = 7.5
    elif kind == "latency-negative-zero":
        victim["latency_ms"] = -0.0
        latencies[victim["query_id"]] = 0.0
    elif kind == "dup-key":
        key = rng.choice(["query_id", "hits", "latency_ms"])
        line = json.dumps(victim)
        dup = {"query_id": '"zz"', "hits": "[]", "latency_ms": "1.0"}[key]
        text = jsonl(rows).replace(line, line[:-1] + f', "{key}": {dup}}}', 1)
        expect, note = REFUSE, f"duplicate {key} in a record"
    elif kind == "huge-rank":
        value = rng.choice([2**63, 2**64, 10**400, -1, 0, 1e308])
        victim["hits"][0]["rank"] = "@RANK@"
        text = jsonl(rows).replace('"@RANK@"', str(value))
        note = f"rank {str(value)[:30]}"
    elif kind == "hits-not-list":
        victim["hits"] = rng.choice(["d1.md", 7, {"chunk_id": "c"}])
        expect = REFUSE
    elif kind == "missing-query":
        rows.remove(victim)
        latencies[victim["query_id"]] = None
    elif kind == "extra-query":
        rows.append({"query_id": "not-in-golden", "hits": [], "latency_ms": 1.0})
    elif kind == "duplicate-record":
        again = dict(victim, latency_ms=42.0)
        rows.append(again)
        latencies[victim["query_id"]] = 42.0
    elif kind == "truncated":
        full = jsonl(rows)
        text = full[: len(full) - rng.randint(3, 12)]
        expect = REFUSE
    elif kind in ("not-utf8", "nul-byte"):
        full = jsonl(rows).encode()
        at = full.index(b'"hits"')
        bad = b"\xff" if kind == "not-utf8" else b"\x00"
        raw = full[:at] + bad + full[at:]
        return _trace_run(case_id, kind, REFUSE, qs, golden, tname, raw, kind, latencies)
    elif kind == "deep-nesting":
        depth = rng.choice([1_200, 5_000, 100_000])
        victim["hits"] = "@DEEP@"
        text = jsonl(rows).replace('"@DEEP@"', "[" * depth + "]" * depth)
        expect, note = REFUSE, f"hits nested {depth}"
    elif kind == "empty":
        text = rng.choice(["", "\n", "\n\n\n"])
        latencies = dict.fromkeys(latencies)
    elif kind == "crlf":
        text = jsonl(rows).replace("\n", "\r\n")
    elif kind == "blank-lines":
        text = jsonl(rows).replace("\n", "\n\n   \n")
    elif kind == "bom":
        text = "\ufeff" + jsonl(rows)
    raw = (text if text is not None else jsonl(rows)).encode()
    return _trace_run(case_id, kind, expect, qs, golden, tname, raw, note, latencies)


def _trace_run(case_id, kind, expect, qs, golden, tname, raw, note, latencies) -> Case:
    return run_case(
        case_id,
        f"trace/{kind}",
        expect,
        qs,
        golden,
        (tname, raw),
        config_text(golden[0], tname),
        note,
        blame=[tname],
        latencies=latencies,
    )


TRACE_MUTATIONS = [
    "latency-impossible",
    "dup-key",
    "huge-rank",
    "latency-impossible",
    "missing-query",
    "hits-not-list",
    "latency-impossible",
    "truncated",
    "extra-query",
    "not-utf8",
    "duplicate-record",
    "deep-nesting",
    "latency-split",
    "crlf",
    "nul-byte",
    "empty",
    "blank-lines",
    "bom",
    "latency-negative-zero",
]


def special_cases() -> list[Case]:
    """A FIFO (nobody writes to it: reading it would block for ever) and ``/dev/zero`` (endless),
    as golden file and as trace, with a 10 MiB input limit: both must be refused, quickly."""
    env = {"KEBAB_EVAL_MAX_INPUT_MB": "10"}
    cases = [
        Case(
            id="special-fifo-golden",
            kind="special/fifo-golden",
            command="validate",
            expect=REFUSE,
            fifos=["g-fifo.yaml"],
            args=["golden", "validate", "{dir}/g-fifo.yaml"],
            blame=["g-fifo.yaml"],
        ),
        Case(
            id="special-zero-golden",
            kind="special/dev-zero-golden",
            command="validate",
            expect=REFUSE,
            args=["golden", "validate", "/dev/zero"],
            blame=["/dev/zero"],
        ),
    ]
    for name, path in (("fifo", "{dir}/t-fifo.jsonl"), ("zero", "/dev/zero")):
        rng = random.Random(f"special:{name}")
        qs = base_queries(rng)
        gname = f"g-special-{name}.yaml"
        cfg = config_text(gname, "PLACEHOLDER").replace('"{dir}/PLACEHOLDER"', json.dumps(path))
        case = run_case(
            f"special-{name}-trace",
            f"special/{'fifo' if name == 'fifo' else 'dev-zero'}-trace",
            REFUSE,
            qs,
            (gname, render("canonical-yaml", qs, rng).encode()),
            ("unused", b""),
            cfg,
            f"trace {path}",
            blame=[path.replace("{dir}/", "")],
        )
        del case.files["unused"]
        case.fifos = ["t-fifo.jsonl"] if name == "fifo" else []
        cases.append(case)
    for case in cases:
        case.env = dict(env)
        case.timeout = 30.0
    return cases


FAMILIES: dict[str, Callable[[str, random.Random, int], Case]] = {
    "golden": golden_case,
    "golden-run": golden_run_case,
    "config": config_case,
    "trace": trace_case,
}
