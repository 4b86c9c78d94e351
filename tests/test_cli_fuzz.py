"""The CLI-level fuzz harness (issue 22, "How to prove it").

A few hundred seeded hostile inputs — golden files, run configs, replay traces, FIFOs and
``/dev/zero`` — each through a real ``kebab-eval`` subprocess (``golden validate`` or a whole
``run`` with the replay system), two at a time, each capped at 2 GiB of address space and a
timeout. Every outcome is classified (see :mod:`tests.fuzz.harness`): a clean refusal (exit 2
naming the input), a clean run (exit 0/1 and correct stored results), or *other* — which fails the
test with the case id, command, exit code and stderr tail.

The figures (tried, clean-refused, clean-run, other, per kind) are printed (``pytest -s``) and
written to ``fuzz-figures.json`` in the test's tmp folder.

Scale: ``KEBAB_EVAL_FUZZ_CASES=N`` generates about N cases plus the four special files (default
64, sized to ~60 s on two idle cores: measured, a ``golden validate`` costs ~0.9 s of CPU — Python,
pandas and pydantic imports — a ``run`` refused at load ~2 s and a whole replay run ~3.5 s, Dagster
import dominating; so golden files get the largest share). Locally, ``KEBAB_EVAL_FUZZ_CASES=600``
tries a few hundred more. ``KEBAB_EVAL_FUZZ_SEED`` changes the inputs; ``KEBAB_EVAL_FUZZ_ONLY=id,id``
reruns the named cases only (a case is a function of seed, family and index: its id reproduces it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.fuzz.cases import EITHER, REFUSE, Case, build_cases
from tests.fuzz.harness import classify, figures, run_all

DEFAULT_CASES = 64
# Share of the cases per family: validate-level golden cases are cheap, whole runs are not.
SHARES = {"golden": 0.62, "golden-run": 0.07, "config": 0.16, "trace": 0.15}


def case_counts(total: int) -> dict[str, int]:
    """How many cases of each family for about ``total`` cases (at least one of each)."""
    return {family: max(1, round(total * share)) for family, share in SHARES.items()}


def test_case_counts_split_the_total():
    assert case_counts(100) == {"golden": 62, "golden-run": 7, "config": 16, "trace": 15}
    assert sum(case_counts(1000).values()) == 1000
    assert min(case_counts(1).values()) == 1


def test_cases_reproduce_by_id():
    """The same seed gives the same bytes; a case does not depend on how many were asked for."""
    small = {c.id: c for c in build_cases(7, case_counts(40))}
    large = {c.id: c for c in build_cases(7, case_counts(400))}
    assert small.keys() <= large.keys()
    assert all(small[i].files == large[i].files and small[i].args == large[i].args for i in small)
    assert {c.files.get(next(iter(c.files), ""), b"") for c in build_cases(8, case_counts(40))} != {
        c.files.get(next(iter(c.files), ""), b"") for c in small.values()
    }


def test_cli_fuzz(tmp_path: Path):
    total = int(os.environ.get("KEBAB_EVAL_FUZZ_CASES", DEFAULT_CASES))
    seed = int(os.environ.get("KEBAB_EVAL_FUZZ_SEED", "22"))
    cases = build_cases(seed, case_counts(total))
    if only := os.environ.get("KEBAB_EVAL_FUZZ_ONLY"):
        cases = [c for c in cases if c.id in only.split(",")]
    start = time.monotonic()
    outcomes = run_all(cases, tmp_path / "cases", workers=2)
    result = figures(outcomes, time.monotonic() - start)
    (tmp_path / "fuzz-figures.json").write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(
        f"\nCLI fuzz (seed {seed}): tried {result['tried']}, clean-refused {result['clean_refused']}, "
        f"clean-run {result['clean_run']}, other {result['other']} in {result['wall_seconds']} s "
        f"(figures: {tmp_path / 'fuzz-figures.json'})"
    )
    for kind, counts in result["by_kind"].items():
        print(f"  {kind:32} {counts}")
    other = [o for o in outcomes if o.status == "other"]
    assert other == [], f"{len(other)} of {len(outcomes)} cases ended otherwise:\n" + "\n".join(
        o.render() for o in other
    )


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
    assert classify(case, 2, "", named, tmp_path, {})[0] == "clean-refused"  # wrapped by the console
    assert classify(case, 2, "", "error: something is wrong", tmp_path, {})[0] == "other"
    framed = named + '\n  File "/x/load.py", line 12, in load'
    assert classify(case, 2, "", framed, tmp_path, {}) == ("other", "a traceback in the output")
    assert classify(case, 0, "ok: 3 queries", "", tmp_path, {})[0] == "other"  # must refuse
    assert classify(case, 3, "", named, tmp_path, {}) == ("other", "exit 3")
    assert classify(case, None, "", "", tmp_path, {}) == ("other", "timed out after 60s")
    assert classify(case, -9, "", "", tmp_path, {}) == ("other", "killed by signal 9")
    memory = "error: MemoryError: (an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)"
    assert classify(case, 1, "", memory, tmp_path, {})[0] == "other"


def test_classify_validate_runs(tmp_path: Path):
    assert (
        classify(_validate_case(EITHER), 0, "ok: 3 queries (3 answerable)", "", tmp_path, {})[0]
        == "clean-run"
    )
    assert classify(_validate_case(EITHER, None), 0, "ok: 1 queries", "", tmp_path, {})[0] == "clean-run"
    assert classify(_validate_case(EITHER), 0, "ok: 2 queries", "", tmp_path, {}) == (
        "other",
        "exit 0 but validated 2 queries, the file has 3",
    )
    internal = "error: OverflowError: x\n(an internal failure; set KEBAB_EVAL_DEBUG=1 to see the traceback)"
    assert classify(_validate_case(EITHER), 1, "", internal, tmp_path, {})[0] == "other"
