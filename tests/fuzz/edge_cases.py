"""The ``edges`` family (issue 44, "Replay and config edges" and the full disk).

Whole runs of a good golden set and replay trace, with one edge:

* ``recorded-error`` — a trace row recording an error (``"error": "timeout: …"``, another error
  string, or ``"timed_out": true``) whose hits put the gold document at rank 1: that query must be
  an error row (``error_class`` set) and not scored from its hits (mrr 0 or null, never 1.0);
* ``slice-gate`` — a gate ``mrr[lang=]: {min: 0}`` on a set where some queries have no ``lang``:
  refused at load (exit 2 naming the config) or the ``(none)`` slice selected, so the run passes
  (exit 0); "no query has lang = ''" failing the run is ``wrong``;
* ``dagster-yaml`` — ``DAGSTER_HOME/dagster.yaml`` broken (not YAML, an unknown key, a wrong
  type, a storage module that does not exist): exit 2 naming ``dagster.yaml``, never exit 3;
* ``output-full`` — ``--pr-comment`` or ``--junit`` to ``/dev/full``: exit 2 naming it (exit 1
  naming it passes too); exit 0 with the file unwritten is ``wrong``, exit 3 ``internal``;
* ``full-disk`` — the storage folder or ``DAGSTER_HOME`` on a tmpfs of 32–512 KiB that fills up
  mid-run: exit 2 naming the folder, or a correct run when it fitted; exit 3 is ``internal``.
  Mounting needs root and a kernel that permits it: without, these cases are ``skipped``, with why.
"""

from __future__ import annotations

import random

from tests.fuzz.cases import EITHER, READ, REFUSE, Case, _good_inputs, config_text, jsonl, render

KINDS = ["recorded-error", "slice-gate", "dagster-yaml", "output-full", "full-disk"]
BROKEN_DAGSTER_YAML = [
    "telemetry: [\n",
    "telemetri:\n  enabled: false\n",
    "telemetry:\n  enabled: sometimes\n",
    "run_storage:\n  module: kebab_fuzz_nowhere\n  class: Storage\n",
    "telemetry:\n  enabled: false\n\x00\n",
]
RECORDED_ERRORS = [{"error": "timeout: took 31 s"}, {"error": "upstream answered 502"}, {"timed_out": True}]


def edges_case(case_id: str, rng: random.Random, index: int) -> Case:
    kind = KINDS[index % len(KINDS)]
    qs, rows, golden, tname = _good_inputs(case_id, rng)
    extra_cfg, args, kw = "", [], {}
    expect, note, blame = EITHER, kind, [f"c-{case_id}.yaml"]
    files: dict[str, bytes] = {}
    if kind == "recorded-error":
        answerable = [q for q in qs if q.get("supports")]
        victim = rng.choice(answerable)
        gold = victim["supports"][0]["doc_id"]
        row = next(r for r in rows if r["query_id"] == victim["id"])
        row["hits"].sort(key=lambda h: h["doc_id"] != gold)
        for rank, hit in enumerate(row["hits"], 1):
            hit["rank"] = rank
        recorded = rng.choice(RECORDED_ERRORS)
        row.update(recorded)
        kw = {"check": "recorded-error", "expected": {"query": victim["id"]}}
        expect = READ
        note = f"{victim['id']} records {recorded} with its gold at rank 1"
    elif kind == "slice-gate":
        for i, q in enumerate(qs):
            if i % 2 == 0:
                q["lang"] = rng.choice(["ko", "en"])
        golden = (golden[0], render("canonical-yaml", qs, rng).encode())
        extra_cfg = "gates:\n  mrr[lang=]: {min: 0}\n"
        kw = {"check": "slice-gate", "expected": {"bad_message": "no query has lang"}}
        blame.append("lang=")
        note = "gate mrr[lang=] min 0, some queries without lang"
    elif kind == "dagster-yaml":
        broken = rng.choice(BROKEN_DAGSTER_YAML)
        files["home/dagster.yaml"] = broken.encode()
        expect, blame, note = REFUSE, ["dagster.yaml"], f"dagster.yaml: {broken!r}"
    elif kind == "output-full":
        option = rng.choice(["--pr-comment", "--junit"])
        args = [option, "/dev/full"]
        blame = ["/dev/full"]
        kw = {"check": "output-full", "expected": {"path": "/dev/full"}}
        note = f"{option} /dev/full"
    else:
        where = rng.choice(["storage", "home"])
        # measured: a run's artifacts take ~440 KiB of storage, DAGSTER_HOME ~1.2 MiB (SQLite)
        size = rng.choice([32, 96, 160, 256] if where == "storage" else [48, 128, 256, 512]) * 1024
        if where == "storage":
            extra_cfg = 'storage: "{dir}/tiny"\n'
            kw = {"tmpfs": {"tiny": size}, "storage": "{dir}/tiny"}
            blame = ["{dir}/tiny"]
        else:
            kw = {"tmpfs": {"home": size}}
            blame = ["{dir}/home"]
        note = f"{where} on a {size // 1024} KiB tmpfs"
    cfg_name = f"c-{case_id}.yaml"
    files.update(
        {
            golden[0]: golden[1],
            tname: jsonl(rows).encode(),
            cfg_name: config_text(golden[0], tname, extra_cfg).encode(),
        }
    )
    return Case(
        id=case_id,
        kind=f"edges/{kind}",
        command="run",
        expect=expect,
        files=files,
        args=["run", "--config", f"{{dir}}/{cfg_name}", "--run-id", f"fz-{case_id}", *args],
        blame=blame,
        queries=len(qs),
        query_ids=[q["id"] for q in qs],
        note=note,
        **kw,
    )
