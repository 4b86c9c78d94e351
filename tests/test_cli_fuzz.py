"""The CLI-level fuzz harness (issue 22, "How to prove it"; issue 44, "The harness in the suite").

Seeded hostile inputs — golden files, run configs, replay traces, FIFOs and ``/dev/zero``
(issue 22), and issue 44's families: systems echoing a secret (``secrets``), YAML-typed ids
(``yaml-ids``), python systems ending their process (``process-end``), Ctrl-C at a seeded moment
(``sigint``), editors' files (``editor``), replay/config edges and a full disk (``edges``) — each
through a real ``kebab-eval`` subprocess, two at a time, each capped at 2 GiB of address space and
a timeout. Every outcome is classified (see :mod:`tests.fuzz.harness`) into the issue's table:
tried / clean exit 2 / plausible / internal / hang / wrong / lost. The last four must be 0: any
case there fails the test with its id, command, exit code, reason and stderr tail.

The table (per family and in total) is printed (``pytest -s``) and written with the per-case
outcomes to ``fuzz-figures.json`` in the test's tmp folder.

Scale: ``KEBAB_EVAL_FUZZ_CASES=N`` generates N cases plus the four special files (default 48,
sized to ~60 s on two idle cores: measured, a ``golden validate`` or ``convert`` costs ~0.9 s of
CPU — Python, pandas and pydantic imports — a ``run`` refused at load ~2 s, a whole replay run
~3.5 s, Dagster import dominating, a secrets run with its export ~5 s; a Ctrl-C case mostly waits.
So golden files get the largest share, and each of issue 44's families a few cases, cycling
through its kinds, see :data:`DEFAULT_COUNTS`). Locally, ``KEBAB_EVAL_FUZZ_CASES=600`` tries a
few hundred more. ``KEBAB_EVAL_FUZZ_SEED`` changes the inputs; ``KEBAB_EVAL_FUZZ_ONLY=id,id``
reruns the named cases only (a case is a function of seed, family and index: its id reproduces it), and
``KEBAB_EVAL_FUZZ_FAMILIES=secrets,sigint`` runs only those families.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.fuzz.cases import EITHER, REFUSE, Case
from tests.fuzz.families import FAMILIES, build_cases
from tests.fuzz.harness import (
    FAILURES,
    HANG,
    INTERNAL,
    LOST,
    PLAUSIBLE,
    REFUSED,
    WRONG,
    Ran,
    classify,
    figures,
    render_table,
    run_all,
)
from tests.fuzz.secret_cases import secret_forms

#: Cases per family of a default run: sized to the CPU the suite gave this test before issue 44
#: (~95 s of subprocess CPU, ~60 s on two idle cores; a run costs ~3.5 s of CPU, a validate or
#: convert ~0.9 s). Every golden mutation comes round once; each issue-44 family gets its first
#: kinds (the issue's own findings first), the rest come round in larger local runs.
DEFAULT_COUNTS = {
    "golden": 18,
    "golden-run": 2,
    "config": 4,
    "trace": 4,
    "secrets": 2,
    "yaml-ids": 4,
    "process-end": 2,
    "sigint": 2,
    "editor": 6,
    "edges": 4,
}
DEFAULT_CASES = sum(DEFAULT_COUNTS.values())


def case_counts(total: int) -> dict[str, int]:
    """How many cases of each family for ``total`` cases: :data:`DEFAULT_COUNTS` scaled (largest
    remainders round up, so the counts add up to ``total``), at least one of each."""
    weight = sum(DEFAULT_COUNTS.values())
    raw = {family: total * n / weight for family, n in DEFAULT_COUNTS.items()}
    counts = {family: int(r) for family, r in raw.items()}
    for family in sorted(raw, key=lambda f: counts[f] - raw[f])[: total - sum(counts.values())]:
        counts[family] += 1
    return {family: max(1, n) for family, n in counts.items()}


def test_case_counts_split_the_total():
    assert set(DEFAULT_COUNTS) == set(FAMILIES)
    assert case_counts(DEFAULT_CASES) == DEFAULT_COUNTS
    assert case_counts(96) == {family: 2 * n for family, n in DEFAULT_COUNTS.items()}
    assert sum(case_counts(1000).values()) == 1000
    assert sum(case_counts(601).values()) == 601
    assert min(case_counts(1).values()) == 1


def test_cases_reproduce_by_id():
    """The same seed gives the same bytes; a case does not depend on how many were asked for."""
    small = {c.id: c for c in build_cases(7, case_counts(40))}
    large = {c.id: c for c in build_cases(7, case_counts(400))}
    assert small.keys() <= large.keys()
    assert all(small[i].files == large[i].files and small[i].args == large[i].args for i in small)
    assert all(small[i].env == large[i].env and small[i].interrupt == large[i].interrupt for i in small)
    assert {c.files.get(next(iter(c.files), ""), b"") for c in build_cases(8, case_counts(40))} != {
        c.files.get(next(iter(c.files), ""), b"") for c in small.values()
    }


def test_cli_fuzz(tmp_path: Path):
    total = int(os.environ.get("KEBAB_EVAL_FUZZ_CASES", DEFAULT_CASES))
    seed = int(os.environ.get("KEBAB_EVAL_FUZZ_SEED", "22"))
    counts = case_counts(total)
    if families := os.environ.get("KEBAB_EVAL_FUZZ_FAMILIES"):
        counts = {f: n for f, n in counts.items() if f in families.split(",")}
    cases = build_cases(seed, counts)
    if families:
        cases = [c for c in cases if not c.id.startswith("special-") or "special" in families]
    if only := os.environ.get("KEBAB_EVAL_FUZZ_ONLY"):
        wanted = only.split(",")
        cases = [c for c in build_cases(seed, _counts_for(wanted)) if c.id in wanted]
    start = time.monotonic()
    outcomes = run_all(cases, tmp_path / "cases", workers=2)
    result = figures(outcomes, time.monotonic() - start)
    (tmp_path / "fuzz-figures.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(
        f"\nCLI fuzz (seed {seed}): {result['tried']} tried in {result['wall_seconds']} s "
        f"(figures: {tmp_path / 'fuzz-figures.json'})\n" + render_table(result["table"])
    )
    for kind, counts_ in result["by_kind"].items():
        print(f"  {kind:32} {counts_}")
    failed = [o for o in outcomes if o.status in FAILURES]
    assert failed == [], f"{len(failed)} of {len(outcomes)} cases ended otherwise:\n" + "\n".join(
        o.render() for o in failed
    )


def _counts_for(ids: list[str]) -> dict[str, int]:
    """Enough cases of each family to build the named ones (``secrets-0003`` needs 4)."""
    counts: dict[str, int] = {}
    for case_id in ids:
        family, _, index = case_id.rpartition("-")
        if family in FAMILIES and index.isdigit():
            counts[family] = max(counts.get(family, 0), int(index) + 1)
    return counts


def _validate_case(expect: str, queries: int | None = 3) -> Case:
    return Case(
        id="golden-0001",
        kind="golden/x",
        command="validate",
        expect=expect,
        blame=["g-golden-0001.yaml"],
        queries=queries,
    )


def test_classify_refusals(tmp_path: Path):
    """The classifier itself: a refusal is clean only with exit 2, the input named, no frames."""
    case = _validate_case(REFUSE)
    named = "error: golden set is invalid (1 problem):\n  - /x/g-golden-\n0001.yaml:line 3: duplicate key"
    assert classify(case, 2, "", named, tmp_path, {})[0] == REFUSED  # wrapped by the console
    assert classify(case, 2, "", "error: something is wrong", tmp_path, {})[0] == WRONG
    framed = named + '\n  File "/x/load.py", line 12, in load'
    assert classify(case, 2, "", framed, tmp_path, {}) == (INTERNAL, "a traceback in the output")
    assert classify(case, 0, "ok: 3 queries", "", tmp_path, {})[0] == WRONG  # must refuse
    assert classify(case, 3, "", named, tmp_path, {}) == (INTERNAL, "exit 3")
    assert classify(case, None, "", "", tmp_path, {}) == (HANG, "timed out after 60s")
    assert classify(case, -9, "", "", tmp_path, {}) == (INTERNAL, "killed by signal 9")
    memory = "error: MemoryError: (an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)"
    assert classify(case, 1, "", memory, tmp_path, {})[0] == INTERNAL
    # a refusal that must say something (YAML ids: "quote it") is clean only when it does
    case.must_say = ["quote"]
    assert classify(case, 2, "", named, tmp_path, {})[0] == WRONG
    assert classify(case, 2, "", named + " — quote it", tmp_path, {})[0] == REFUSED


def test_classify_validate_runs(tmp_path: Path):
    assert (
        classify(_validate_case(EITHER), 0, "ok: 3 queries (3 answerable)", "", tmp_path, {})[0] == PLAUSIBLE
    )
    assert classify(_validate_case(EITHER, None), 0, "ok: 1 queries", "", tmp_path, {})[0] == PLAUSIBLE
    assert classify(_validate_case(EITHER), 0, "ok: 2 queries", "", tmp_path, {}) == (
        WRONG,
        "exit 0 but validated 2 queries, the file has 3",
    )
    internal = "error: OverflowError: x\n(an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)"
    assert classify(_validate_case(EITHER), 1, "", internal, tmp_path, {})[0] == INTERNAL


def test_classify_convert_ids(tmp_path: Path):
    """``golden convert``: an id other than the text written is wrong, a query missing is lost."""
    case = Case(
        id="yaml-ids-0000",
        kind="yaml-ids/x",
        command="convert",
        expect=EITHER,
        queries=2,
        expected={"queries.0.id": "010", "queries.1.supports.0.doc_id": "no"},
    )
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"queries": [{"id": "010"}, {"id": "q2", "supports": [{"doc_id": "no"}]}]}))
    assert classify(case, 0, "", "", tmp_path, {})[0] == PLAUSIBLE
    out.write_text(json.dumps({"queries": [{"id": "8"}, {"id": "q2", "supports": [{"doc_id": "False"}]}]}))
    status, reason = classify(case, 0, "", "", tmp_path, {})
    assert status == WRONG and "queries.0.id = '8', the file wrote '010'" in reason
    out.write_text(json.dumps({"queries": [{"id": "010"}]}))
    assert classify(case, 0, "", "", tmp_path, {})[0] == LOST


def test_classify_finds_every_form_of_a_secret(tmp_path: Path):
    """A secret in any form, in any file under the case folder (Parquet read as values) or in the
    output, is wrong — whatever the exit; the same text without it is not."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.fuzz.echo_server import FORMS, echo

    secret = "kfzAbCdEfGhIj/KlMnOpQrSt+UvWxYz0123="
    case = _validate_case(EITHER)
    case.secrets = secret_forms(secret)
    ok = "ok: 3 queries"
    assert classify(case, 0, ok, "", tmp_path, {})[0] == PLAUSIBLE
    for form in FORMS:
        assert classify(case, 0, ok, f"error body: {echo(secret, form)}", tmp_path, {})[0] == WRONG, form
    assert (
        classify(case, 0, ok, base64.b64encode(f"Bearer {secret}".encode()).decode(), tmp_path, {})[0]
        == WRONG
    )
    # doubled escapes, as a JSON store writes an escaped body
    assert (
        classify(case, 2, "", "g-golden-0001.yaml " + json.dumps(echo(secret, "json-slash")), tmp_path, {})[0]
        == WRONG
    )
    store = tmp_path / "home" / "kebab-eval" / "hits.parquet"
    store.parent.mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": ["d1.md", f"doc-{secret}"] * 500}), store, compression="zstd")
    status, reason = classify(case, 0, ok, "", tmp_path, {})
    assert status == WRONG and "hits.parquet" in reason
    store.unlink()
    assert classify(case, None, ok, secret, tmp_path, {})[0] == HANG  # a hang stays a hang


def test_classify_process_end_and_sigint(tmp_path: Path):
    """A green exit after a system ended its process is wrong, nothing stored lost; a Ctrl-C
    ignored is wrong, a traceback internal, a slow stop a hang, exit 130 with nothing stored
    plausible."""
    end = Case(
        id="process-end-0000",
        kind="process-end/exit0",
        command="run",
        expect=EITHER,
        check="process-end",
        queries=3,
    )
    env = {"DAGSTER_HOME": str(tmp_path / "home")}
    assert classify(end, 0, "", "", tmp_path, env)[0] == WRONG
    assert classify(end, 3, "", "", tmp_path, env)[0] == LOST
    assert classify(end, -11, "", "", tmp_path, env)[0] == LOST
    stop = Case(
        id="sigint-0000",
        kind="sigint/group",
        command="run",
        expect=EITHER,
        check="sigint",
        interrupt=(2.0, "group", None),
    )
    assert classify(stop, Ran(0, 9.0, 2.0, 7.0), "", "", tmp_path, env)[0] == WRONG
    assert (
        classify(stop, Ran(3, 3.0, 2.0, 1.0), "", "Traceback (most recent call last):", tmp_path, env)[0]
        == INTERNAL
    )
    assert classify(stop, Ran(130, 20.0, 2.0, 18.0), "", "", tmp_path, env)[0] == HANG
    assert classify(stop, Ran(130, 3.0, 2.0, 1.0), "", "interrupted", tmp_path, env)[0] == PLAUSIBLE
    # ended before the SIGINT (a refusal at load): judged as any run
    assert classify(stop, Ran(3, 1.0, None, None), "", "", tmp_path, env)[0] == INTERNAL
