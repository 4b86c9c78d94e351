"""Replay traces with impossible numbers are refused at load, every offender named (issue 22 item 3):
negative latencies gave ``total_suite_ms = -453``, 1e308 latencies gave ``inf`` (and then a crashing
export), string latencies were dropped silently while NaN was refused. And ``export`` writes a
non-finite number an older run stored as null, with a warning, instead of crashing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.systems.replay import INT64_MAX, MAX_LATENCY_MS, read_trace
from tests.conftest import write
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)

# line of the trace → (the record's impossible field, the words of the reason)
BAD_LINES: dict[int, tuple[dict[str, Any], str, str]] = {
    1: ({"latency_ms": -453}, "latency_ms", "cannot be negative"),
    2: ({"latency_ms": 1e308}, "latency_ms", "more than one day"),
    3: ({"latency_ms": "12"}, "latency_ms", "expected a number of milliseconds or null, got '12'"),
    4: ({"latency_ms": {"retrieval": 3, "answer": -1}}, "latency_ms.answer", "cannot be negative"),
    5: ({"retrieval_ms": float("nan")}, "retrieval_ms", "expected a finite number, got nan"),
    6: ({"hits": [{"chunk_id": "c", "rank": 0}]}, "hits[0].rank", "from 1 to 2^63 - 1, got 0"),
    7: ({"hits": [{"chunk_id": "c", "score": float("inf")}]}, "hits[0].score", "got inf"),
    8: ({"answer": {"text": "t", "prompt_tokens": -5}}, "answer.prompt_tokens", "from 0 to 2^63 - 1"),
}


def golden(tmp_path: Path, n: int) -> Path:
    entries = "".join(
        f"  - id: q{i}\n    query: where is q{i}\n    supports: [{{rel_path: docs/q{i}.md}}]\n"
        for i in range(1, n + 1)
    )
    return write(tmp_path / "golden.yaml", f"name: numbers\nqueries:\n{entries}")


def replay_config(tmp_path: Path, rows: list[dict]) -> Path:
    trace = tmp_path / "per_query.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # NaN/Infinity too
    gold = golden(tmp_path, len(rows))
    return write(
        tmp_path / "eval.yaml",
        f"golden: {gold}\nbaseline: none\ndefault_gates: false\nanswers: true\n"
        f"system: {{kind: replay, path: {trace}, format: kebab}}\n",
    )


def test_run_refuses_every_impossible_number_naming_line_and_field(env, tmp_path):  # noqa: F811
    rows = [{"query_id": f"q{n}", "hits": [{"chunk_id": "c"}], **BAD_LINES[n][0]} for n in sorted(BAD_LINES)]
    rows.append({"query_id": f"q{len(rows) + 1}", "latency_ms": 12.5, "hits": []})  # a fine record
    wide = {**env, "COLUMNS": "1000"}  # one offender a line: the console wraps at its width
    proc = cli(wide, "run", "--run-id", "numbers", "--config", str(replay_config(tmp_path, rows)))
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    flat = " ".join(proc.stderr.split())
    assert f"cannot be read ({len(BAD_LINES)} problems)" in flat, flat
    for n, (_, field, reason) in BAD_LINES.items():
        (line,) = [x for x in proc.stderr.splitlines() if f"per_query.jsonl:line {n} — " in x]
        assert f"per_query.jsonl:line {n} — query 'q{n}': {field}: " in line and reason in line, line
    assert f"line {len(rows)}" not in flat
    assert not (Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts" / "golden_set").exists()


def test_export_writes_non_finite_numbers_of_an_older_run_as_null(env, tmp_path):  # noqa: F811
    rows = [
        {
            "query_id": "q1",
            "latency_ms": 12.5,
            "hits": [{"chunk_id": "docs/q1.md#0", "doc_path": "docs/q1.md"}],
        }
    ]
    proc = cli(env, "run", "--run-id", "old", "--config", str(replay_config(tmp_path, rows)))
    assert proc.returncode == 0, proc.stderr
    # What an older version stored from 1e308 latencies: total_suite_ms = inf.
    store = RunStore(Path(env["DAGSTER_HOME"]) / "kebab-eval" / "artifacts")
    tables, info = store.read("run_metrics", "old")
    metrics = tables["metrics"].copy()
    metrics["value"] = metrics["value"].astype("Float64")
    metrics.loc[metrics["metric"] == "total_suite_ms", "value"] = math.inf
    store.write("run_metrics", "old", {**tables, "metrics": metrics}, info)

    exported = cli(env, "export", "old")
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)  # strict JSON: no Infinity
    assert doc["metrics"]["total_suite_ms"] is None
    assert doc["metrics"]["n_queries"] == 1
    assert "1 non-finite number(s), written as null: $.metrics.total_suite_ms" in exported.stderr


# ---------------------------------------------------------------------------------------------
# property: the trace reader accepts exactly the numbers in their domain

NUMBERS = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, MAX_LATENCY_MS, MAX_LATENCY_MS + 1, INT64_MAX, INT64_MAX + 1, 1e308, 2.5]),
    st.sampled_from(["12", True, [1]]),
)


def latency_ok(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        number = float(v)
    except OverflowError:
        return False
    return math.isfinite(number) and 0 <= number <= MAX_LATENCY_MS


def whole_ok(v: Any, low: int) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return True  # not a number: the hit parser's per-query bad_response, not a load error
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return False
    return low <= v <= INT64_MAX


def score_ok(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return True
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(retrieval=NUMBERS, answer=NUMBERS, rank=NUMBERS, score=NUMBERS, tokens=NUMBERS)
def test_trace_reader_accepts_exactly_the_numeric_domain(tmp_path, retrieval, answer, rank, score, tokens):
    entry = {
        "query_id": "q1",
        "latency_ms": {"retrieval": retrieval, "answer": answer},
        "hits": [{"chunk_id": "c", "rank": rank, "score": score}],
        "answer": {"text": "t", "completion_tokens": tokens},
    }
    path = tmp_path / "trace.jsonl"
    path.write_text("\n" + json.dumps(entry) + "\n", encoding="utf-8")
    expected_bad = {
        field
        for field, ok in (
            ("latency_ms.retrieval", latency_ok(retrieval)),
            ("latency_ms.answer", latency_ok(answer)),
            ("hits[0].rank", whole_ok(rank, 1)),
            ("hits[0].score", score_ok(score)),
            ("answer.completion_tokens", whole_ok(tokens, 0)),
        )
        if not ok
    }
    try:
        records, *_ = read_trace(path, "kebab")
    except InputError as exc:
        assert {o.reason.split(": ", 1)[0] for o in exc.offenders} == expected_bad
        assert {(o.file, o.position, o.query_id) for o in exc.offenders} == {(str(path), "line 2", "q1")}
        return
    assert expected_bad == set()
    record = records["q1"]
    for got, given_value in ((record.retrieval_ms, retrieval), (record.answer_ms, answer)):
        assert got == (None if given_value is None else float(given_value))
        assert got is None or 0 <= got <= MAX_LATENCY_MS
