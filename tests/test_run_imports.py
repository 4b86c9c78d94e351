"""A demo ``kebab-eval run`` imports only what it uses (issue 45: "seconds, not tens of seconds").

Structural, not timed (speed is measured in ``benchmarks/bench_import.py`` and
``benchmarks/bench_cli_latency.py``): each case runs in a fresh subprocess — the command's real
entry point, a fresh ``DAGSTER_HOME`` — and reports which modules were imported. A library that
costs tenths of a second to import (scipy.stats ~0.5 s, matplotlib ~0.2 s on a quiet machine) and
that a first demo run does not use must stay out of it: a module-level import of one, anywhere on
the run path, fails here with the chain of modules that pulled it in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.test_cli import cli, cli_env

#: Not used by a first demo run (no baseline to compare with, the built-in lexical system, the
#: offline judge): statistics and charts of a comparison, other system kinds' clients and
#: frameworks, the judge's HTTP clients, Dagster's web server and other storages, other engines;
#: nor what builds a reference index (bm25s, and the SciPy and Numba it imports; the Markdown
#: parser): the demo corpus's index ships prebuilt (reference/cache.py: BUNDLED_DIR).
NOT_USED_BY_A_DEMO_RUN = (
    "bm25s",
    "numba",
    "scipy.sparse",
    "markdown_it",
    "scipy.stats",
    "scipy.optimize",
    "matplotlib",
    "statsmodels",
    "sklearn",
    "httpx",
    "requests",
    "duckdb",
    "polars",
    "openai",
    "torch",
    "sentence_transformers",
    "celery",
    "redis",
    "psycopg2",
    "dagster_webserver",
    "dagster_graphql",
    "dagster_postgres",
    "llama_index",
    "haystack",
    "langchain_core",
    "opentelemetry",
    "ranx",
    "pytrec_eval",
)
#: What a run does need: present, or the probe did not see a real run.
USED_BY_A_RUN = ("dagster", "pandas", "pyarrow")

#: Runs ``kebab-eval ARGS`` (JSON in argv[1]) through the console script's ``main`` in this
#: process, then prints on stdout's last line the exit code, every imported module's name, and for
#: each module named in argv[2] (JSON) that was imported, the package's frames that imported it.
PROBE = """
import json, sys, traceback

watched = set(json.loads(sys.argv[2]))
importers = {}


class Witness:  # sees each first import of a watched module; finds nothing itself
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in watched and name not in importers:
            frames = [f for f in traceback.extract_stack() if "kebab_eval_pipeline" in f.filename]
            importers[name] = [f"{f.filename.split('kebab_eval_pipeline')[-1]}:{f.lineno}" for f in frames]
        return None


sys.meta_path.insert(0, Witness)
from kebab_eval_pipeline import cli

sys.argv = ["kebab-eval", *json.loads(sys.argv[1])]
try:
    cli.main()
    code = 0
except SystemExit as exc:
    code = 0 if exc.code is None else exc.code
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules), "importers": importers}))
"""


def test_cli_start_up_imports_no_data_or_orchestration_library(tmp_path):
    """Importing the command tree (every command's options) loads no pandas, numpy, Arrow, Dagster
    or SQL stack: ``--help``, a typo and the reading commands start in a fraction of a second."""
    # the whole tree (`app`), as --help and a typo build it: importing cli.main builds none of it
    code = (
        "import json, sys, kebab_eval_pipeline.cli.main as m; m.app; print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout))
    assert "kebab_eval_pipeline.cli.run" in modules  # the run command's options were read
    heavy = ("pandas", "numpy", "pyarrow", "dagster", "sqlalchemy", "alembic", "scipy", "matplotlib", "bm25s")
    assert not modules & set(heavy), sorted(modules & set(heavy))


def _probe_run(env: dict, cwd, run_id: str, watched: tuple[str, ...]) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["run", "--run-id", run_id]), json.dumps(watched)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    return result, proc.stdout


def test_a_demo_run_imports_only_what_it_uses(tmp_path):
    result, stdout = _probe_run(cli_env(tmp_path), tmp_path, "imports-1", NOT_USED_BY_A_DEMO_RUN)
    assert "report:" in stdout  # a real run, reported
    modules = set(result["modules"])
    assert set(USED_BY_A_RUN) <= modules, sorted(set(USED_BY_A_RUN) - modules)
    unused = {m: result["importers"].get(m) for m in NOT_USED_BY_A_DEMO_RUN if m in modules}
    assert not unused, f"imported by a demo run that does not use them (module: importing frames): {unused}"


#: Not loaded even by a run that has a baseline to compare with: the paired tests take their
#: binomial and t distributions from scipy.special, the HTML report's charts are SVG its templates
#: draw (issue 45: together they cost ~1.2 s of a run with a baseline).
NOT_USED_BY_A_COMPARING_RUN = ("scipy.stats", "matplotlib")


def test_a_run_with_a_baseline_loads_neither_scipy_stats_nor_matplotlib(tmp_path):
    env = cli_env(tmp_path)
    first = cli(env, "run", "--run-id", "compared-1", cwd=tmp_path)  # what it imports is not watched
    assert first.returncode == 0, first.stderr
    result, stdout = _probe_run(env, tmp_path, "compared-2", NOT_USED_BY_A_COMPARING_RUN)
    # A real comparison against the first run, its HTML report with the three charts drawn.
    assert "comparison: baseline 'compared-1'" in stdout, stdout
    report = next(
        line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("comparison report: ")
    )
    html = Path(report).read_text(encoding="utf-8")
    assert html.count('<svg role="img"') == 3, report
    modules = set(result["modules"])
    assert "kebab_eval_pipeline.compare.significance" in modules and "jinja2" in modules
    loaded = {m: result["importers"].get(m) for m in NOT_USED_BY_A_COMPARING_RUN if m in modules}
    assert not loaded, f"imported by a run with a baseline (module: importing frames): {loaded}"
