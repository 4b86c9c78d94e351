"""The ``editor`` family (issue 44, "Editors' files and BOMs" and the duplicate support).

Files as users' editors and tools write them, each through ``kebab-eval golden convert --out
out.json`` (ids checked as written) or a whole run:

* a UTF-8 BOM at the start of a JSON / JSONL golden file, a kebab trace, BEIR ``queries.jsonl``,
  TREC SGML or TSV topics, TREC qrels, ranx JSON qrels — read, and never inside an id (the issue:
  JSON and JSONL are read by content, and a BOM is stripped everywhere or refused everywhere, so
  reading is the one consistent choice: every BOM case expects the file read, ids without BOM);
* JSONL named ``.txt``, and JSONL reached through an extension-less symlink — read by content;
* a BEIR folder whose first query line is longer than 64 KiB — read;
* a BEIR ``queries.jsonl`` with a key written twice in a record — refused (exit 2 naming the file),
  as the JSONL golden reader refuses one;
* a support listed twice (``supports: [{doc_id: d1}, {doc_id: d1}]``, d1 at rank 1) — refused
  naming the file, or counted once (every ranking measure of that query 1.0, not 0.5).
"""

from __future__ import annotations

import json
import random

from tests.fuzz.cases import (
    EITHER,
    READ,
    REFUSE,
    WORDS,
    Case,
    base_queries,
    config_text,
    jsonl,
    render,
    trace_rows,
)

BOM = "\ufeff"
KINDS = [
    "bom-json",
    "jsonl-txt",
    "bom-trec-tsv",
    "dup-support",
    "jsonl-symlink",
    "bom-beir",
    "beir-long-line",
    "beir-dup-key",
    "bom-trace",
    "bom-trec-sgml",
    "bom-ranx",
    "bom-trec-qrels",
]
JSON_FORMATS = ["canonical-json", "canonical-jsonl", "supports-jsonl", "wfgy-jsonl"]


def _convert(
    case_id: str, kind: str, files: dict[str, bytes], inputs: list[str], ids: list[str], note: str, **kw
) -> Case:
    return Case(
        id=case_id,
        kind=f"editor/{kind}",
        command="convert",
        expect=kw.pop("expect", READ),
        files=files,
        args=["golden", "convert", *[f"{{dir}}/{i}" for i in inputs], "--out", "{dir}/out.json"],
        blame=kw.pop("blame", inputs),
        queries=len(ids),
        expected={"ids": sorted(ids)},
        note=note,
        **kw,
    )


def _topics(rng: random.Random, n: int) -> list[tuple[str, str]]:
    return [(str(301 + i), f"{rng.choice(WORDS)} {i}") for i in range(n)]


def _trec_qrels(topics: list[tuple[str, str]]) -> str:
    return "".join(f"{qid} 0 doc{qid} 1\n" for qid, _ in topics)


def editor_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind = KINDS[index % len(KINDS)]
    if kind in ("bom-json", "jsonl-txt", "jsonl-symlink"):
        fmt = rng.choice(JSON_FORMATS if kind == "bom-json" else [f for f in JSON_FORMATS if "jsonl" in f])
        qs = base_queries(rng)
        text = render(fmt, qs, rng)
        ids = [q["id"] for q in qs]
        if kind == "bom-json":
            name = f"g.{fmt.rsplit('-', 1)[1]}"
            return _convert(case_id, kind, {name: (BOM + text).encode()}, [name], ids, f"{fmt} with a BOM")
        if kind == "jsonl-txt":
            return _convert(case_id, kind, {"g.txt": text.encode()}, ["g.txt"], ids, f"{fmt} named .txt")
        case = _convert(
            case_id, kind, {"data/g.jsonl": text.encode()}, ["golden"], ids, f"{fmt} via symlink 'golden'"
        )
        case.links = {"golden": "data/g.jsonl"}
        return case
    if kind in ("bom-beir", "beir-long-line", "beir-dup-key"):
        topics = _topics(rng, rng.randint(2, 5))
        records = [{"_id": qid, "text": text} for qid, text in topics]
        if kind == "beir-long-line":
            records[0]["text"] = " ".join(rng.choice(WORDS) for _ in range(rng.choice([9_000, 20_000])))
        lines = [json.dumps(r) for r in records]
        if kind == "beir-dup-key":
            at = rng.randrange(len(lines))
            lines[at] = lines[at][:-1] + ', "text": "the other text"}'
        queries = "\n".join(lines) + "\n"
        if kind == "bom-beir":
            queries = BOM + queries
        qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"{qid}\tdoc{qid}\t1\n" for qid, _ in topics)
        files = {"beir/queries.jsonl": queries.encode(), "beir/qrels/test.tsv": qrels.encode()}
        note = {
            "bom-beir": "BOM in queries.jsonl",
            "beir-long-line": f"first query line {len(lines[0])} bytes",
        }.get(kind, "a key twice in a queries.jsonl record")
        expect = REFUSE if kind == "beir-dup-key" else READ
        return _convert(
            case_id,
            kind,
            files,
            ["beir"],
            [q for q, _ in topics],
            note,
            expect=expect,
            blame=["queries.jsonl"],
        )
    if kind in ("bom-trec-tsv", "bom-trec-sgml", "bom-ranx", "bom-trec-qrels"):
        topics = _topics(rng, rng.randint(2, 5))
        if kind == "bom-trec-sgml":
            topic_text = "".join(
                f"<top>\n<num> Number: {qid}\n<title> {t}\n<desc> Description:\n{t} in detail.\n</top>\n\n"
                for qid, t in topics
            )
        else:
            topic_text = "".join(f"{qid}\t{t}\n" for qid, t in topics)
        qrels = _trec_qrels(topics)
        qname = "qrels.txt"
        if kind == "bom-ranx":
            qrels, qname = json.dumps({qid: {f"doc{qid}": 1} for qid, _ in topics}), "qrels.json"
        if kind in ("bom-trec-tsv", "bom-trec-sgml"):
            topic_text = BOM + topic_text
        else:
            qrels = BOM + qrels
        files = {"topics.txt": topic_text.encode(), qname: qrels.encode()}
        return _convert(
            case_id, kind, files, ["topics.txt", qname], [q for q, _ in topics], kind.replace("-", " ")
        )
    if kind == "bom-trace":
        qs = base_queries(rng)
        rows = trace_rows(rng, qs)
        files = {
            "g.yaml": render("canonical-yaml", qs, rng).encode(),
            "t.jsonl": (BOM + jsonl(rows)).encode(),
            "c.yaml": config_text("g.yaml", "t.jsonl").encode(),
        }
        return Case(
            id=case_id,
            kind=f"editor/{kind}",
            command="run",
            expect=READ,
            files=files,
            args=["run", "--config", "{dir}/c.yaml", "--run-id", f"fz-{case_id}"],
            blame=["t.jsonl"],
            queries=len(qs),
            query_ids=[q["id"] for q in qs],
            latencies={r["query_id"]: r["latency_ms"] for r in rows},
            note="kebab trace with a BOM",
        )
    # dup-support: q<victim> lists its document twice; the trace has it at rank 1
    qs = base_queries(rng)
    for q in qs:
        q.pop("answerable", None)
        q["supports"] = [{"doc_id": f"d{q['id'][1:]}.md"}]
    victim = rng.choice(qs)
    victim["supports"] = [dict(victim["supports"][0]), dict(victim["supports"][0])]
    rows = trace_rows(rng, qs)
    for r in rows:
        if r["query_id"] == victim["id"]:
            r["hits"].sort(key=lambda h: h["doc_id"] != victim["supports"][0]["doc_id"])
            for rank, hit in enumerate(r["hits"], 1):
                hit["rank"] = rank
    fmt = rng.choice(["canonical-yaml", "canonical-json", "canonical-jsonl"])
    gname = f"g.{fmt.rsplit('-', 1)[1]}"
    files = {
        gname: render(fmt, qs, rng).encode(),
        "t.jsonl": jsonl(rows).encode(),
        "c.yaml": config_text(gname, "t.jsonl", "k: [1, 2, 5]\n").encode(),
    }
    return Case(
        id=case_id,
        kind=f"editor/{kind}",
        command="run",
        expect=EITHER,
        check="dup-support",
        files=files,
        args=["run", "--config", "{dir}/c.yaml", "--run-id", f"fz-{case_id}"],
        blame=[gname],
        queries=len(qs),
        query_ids=[q["id"] for q in qs],
        expected={"query": victim["id"]},
        note=f"{fmt}: {victim['id']} lists {victim['supports'][0]['doc_id']} twice, at rank 1",
    )
