"""`kebab-eval sweep CONFIG` as a user runs it: real subprocesses, real runs, real exit codes.

One sweep of the demo over two chunk sizes, made once for the module; each variant cross-checked
against a plain `kebab-eval run --chunk-size N` and the leaderboard against `kebab-eval compare A B`.
"""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import clean_cli_env, write
from tests.test_cli import cli, no_traceback
from tests.test_cli_compare import strict_json

CONFIG = """\
answers: false
baseline: none
storage: store
sweep:
  name: sizes
  grid:
    system.chunk_size: [200, 800]
  metric: mrr
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return clean_cli_env(tmp_path_factory, "sweep-cli")


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return write(tmp_path_factory.mktemp("sweep-config") / "eval.yaml", CONFIG)


@pytest.fixture(scope="module")
def store(config):
    """The runs' store, read in-process (a subprocess per export would double the module's time)."""
    return RunStore(config.parent / "store")


@pytest.fixture(scope="module")
def swept(env, config):
    proc = cli(env, "sweep", str(config), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    return proc


def test_every_variant_is_a_stored_run_with_its_settings(env, config, store, swept):
    board = strict_json(swept.stdout)
    ids = {v["settings"]["system.chunk_size"]: v["run_id"] for v in board["variants"]}
    assert sorted(ids) == ["200", "800"]
    lines = [line for line in swept.stderr.splitlines() if line.startswith("[")]
    assert lines[0] == f"[1/2] {ids['200']} (chunk_size=200): running"
    assert lines[1].startswith(f"[1/2] {ids['200']} (chunk_size=200): mrr 0.")
    assert lines[2] == f"[2/2] {ids['800']} (chunk_size=800): running"
    for size, run_id in ids.items():
        metrics = store.stored_run(run_id).metrics
        versions = metrics.info["versions"]
        assert versions["chunker_version"] == f"md-heading-2:size={size}:overlap=0"
        assert versions["sweep.system.chunk_size"] == size
        assert versions["sweep"] == f"sizes/{run_id.removeprefix('sweep-sizes-')}"
        assert metrics.info["sweep"] == {"name": "sizes", "variant": run_id.removeprefix("sweep-sizes-"),
                                         "settings": {"system.chunk_size": int(size)}}  # fmt: skip
        if size == "200":  # not the default chunk size: the variant's own setting made this run
            # An independent run of the same settings, by hand (the sweep's config: its base
            # settings for an id that is no variant): the same MRR.
            plain = cli(env, "run", "--run-id", "plain-200", "--config", str(config), "--chunk-size", size)
            assert plain.returncode == 0, plain.stderr
            assert "sweep" not in store.stored_run("plain-200").metrics.info
            assert store.stored_run("plain-200").metrics.metrics["mrr"] == metrics.metrics["mrr"]
        mean = next(v["mean"] for v in board["variants"] if v["run_id"] == run_id)
        assert mean == pytest.approx(metrics.metrics["mrr"], abs=5e-5)  # stored rounded to 4 places


def test_leaderboard_matches_compare_a_b(env, config, swept, tmp_path):
    board = strict_json(swept.stdout)
    a, b = (v["run_id"] for v in sorted(board["variants"], key=lambda v: v["settings"]["system.chunk_size"]))
    proc = cli(env, "compare", a, b, "--json", "--config", str(config), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    # The comparison shows which swept setting differs.
    report = (tmp_path / "comparison.md").read_text(encoding="utf-8")
    assert "| sweep.system.chunk_size ⚠ | 200 | 800 |" in report
    mrr = next(m for m in strict_json(proc.stdout)["per_metric"] if m["metric"] == "mrr")
    (pair,) = board["pairs"]
    assert (pair["run_a"], pair["run_b"]) == (a, b)  # the grid's order
    assert pair["p_value"] == mrr["p_value"] and pair["n"] == mrr["n_paired"]
    assert pair["delta"] == pytest.approx(mrr["delta"], abs=5e-5)
    # one pair: Holm leaves its p-value as it is
    assert pair["p_adjusted"] == pair["p_value"] and pair["significant"] == (mrr["p_value"] < 0.05)
    best = a if mrr["delta"] < 0 else b
    assert board["variants"][0]["run_id"] == best and board["best"] == [best.removeprefix("sweep-sizes-")]
    assert [v["rank"] for v in board["variants"]] == [1, 2]


def test_stored_variants_are_skipped_and_text_leaderboard(env, config, swept):
    proc = cli(env, "sweep", str(config), "--only", "chunk_size-800")
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert line.startswith("[1/1] sweep-sizes-chunk_size-800-") and line.endswith(
        "(chunk_size=800): stored, skipped (--rerun runs it again)"
    )
    board = strict_json(swept.stdout)
    lines = proc.stdout.splitlines()
    assert lines[0] == "sweep sizes: leaderboard"
    assert lines[3].split() == [
        "#",
        "rank",
        "group",
        "system.chunk_size",
        "mrr",
        "95%",
        "CI",
        "better",
        "than",
        "role",
        "outcome",
    ]
    first = board["variants"][0]
    assert lines[4].split()[:5] == ["1", "1", first["letters"], first["settings"]["system.chunk_size"],
                                    f"{first['mean']:.4f}"]  # fmt: skip
    assert lines[4].split()[-3:] == ["sweep-variant", "(sizes)", "passed"]
    assert [(v["role"], v["outcome"]) for v in board["variants"]] == [("sweep-variant (sizes)", "passed")] * 2
    # only the variants of one outcome: none failed, so nothing to rank — a note, not an error
    failed = cli(env, "sweep", str(config), "--outcome", "failed")
    assert (failed.returncode, failed.stdout) == (0, ""), failed.stderr
    assert (
        "no leaderboard: 0 of 2 variants stored with outcome failed: a leaderboard needs two" in failed.stderr
    )
    passed = cli(env, "sweep", str(config), "--outcome", "passed", "--format", "json")
    assert passed.returncode == 0 and strict_json(passed.stdout)["left_out"] == []


def test_bad_input_exits_2_naming_every_offender(env, tmp_path):
    bad = write(
        tmp_path / "bad.yaml",
        "sweep:\n  name: s\n  grid:\n    system.chunk_size: [big]\n    system.mdoe: [lexical]\n",
    )
    proc = cli(env, "sweep", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    no_traceback(proc)
    assert (
        "sweep.grid.system.chunk_size" in proc.stderr
        and "big: Input should be a valid integer" in proc.stderr
    )
    assert "sweep.grid.system.mdoe" in proc.stderr and "did you mean 'system.mode'?" in proc.stderr

    good = write(tmp_path / "good.yaml", CONFIG)
    proc = cli(env, "sweep", str(good), "--only", "chunk_size-300", "--format", "yaml")
    assert proc.returncode == 2
    no_traceback(proc)
    assert "'yaml': expected one of text, markdown, json" in proc.stderr
    proc = cli(env, "sweep", str(good), "--outcome", "green")
    assert proc.returncode == 2 and "--outcome: 'green': expected one of passed, failed" in proc.stderr
    proc = cli(env, "sweep", str(good), "--only", "chunk_size-300")
    assert proc.returncode == 2
    assert "'chunk_size-300': not a variant of sweep 'sizes'" in " ".join(proc.stderr.split())
