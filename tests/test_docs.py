"""The user documentation stands alone on a fresh clone: README.md and docs/.

A user's clone holds only the repository — no ``../shared`` folder, no project contract. So:

- every link in README.md and docs/**/*.md stays inside the repository and resolves (a file that
  exists, a heading anchor that exists);
- no page cites the project contract ("SPEC", "§") or the workspace's ``shared/`` folder;
- every run config under docs/examples loads from a copy of the repository layout that has no
  ``../shared`` beside it, and the ones that need no server run through the real CLI (exit 0);
- the README's CI snippet runs as written from such a copy.

The bundled kebab-docs corpus (docs/examples/kebab-docs/corpus/) is test data, not documentation:
its own markdown links and "§" references are kebab's and are not checked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.chain.pipeline import load_golden_artifact
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.golden.load import load_golden
from tests import docs_pages
from tests.conftest import REPO
from tests.forked_cli import run_cli

CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
EXAMPLES = REPO / "docs" / "examples"
BUNDLED_CORPUS = EXAMPLES / "kebab-docs" / "corpus"
CI_CONFIG = EXAMPLES / "ci" / "eval.yaml"


def _is_data(path: Path) -> bool:
    return path.is_relative_to(BUNDLED_CORPUS)


DOC_PAGES = [
    REPO / "README.md",
    *sorted(
        p
        for p in (REPO / "docs").rglob("*.md")
        if not _is_data(p) and "build" not in p.relative_to(REPO).parts
    ),
]
EXAMPLE_CONFIGS = sorted(
    p
    for p in EXAMPLES.rglob("*.yaml")
    if not _is_data(p)
    and p.name != "defs.yaml"  # a Dagster component's attributes (tests/orchestration/test_component.py)
    and "queries" not in (yaml.safe_load(p.read_text(encoding="utf-8")) or {})
)


# -- (a) links --------------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]*)>")
_HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)


def prose(text: str) -> str:
    """The markdown with fenced code blocks and code spans blanked: links inside code are text."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Every link target of a markdown page: inline links and images, reference definitions,
    autolinks and HTML ``href``/``src`` — outside code."""
    body = prose(text)
    return [
        m.group(1)
        for pattern in (_INLINE_LINK, _REFERENCE_DEF, _AUTOLINK, _HTML_LINK)
        for m in pattern.finditer(body)
    ]


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors of a page: lower-cased, punctuation but ``-``/``_`` dropped,
    spaces to ``-``; a repeated heading gets ``-1``, ``-2``…"""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", _FENCE.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_link_helpers_find_what_they_should():
    page = (
        '# Top `x`\n[a](docs/a.md) ![i](ui/i.png "t") <https://e.org> `[no](code.md)`\n'
        '```\n[no](fenced.md)\n```\n[r]: ../out.md\n<a href="h.md">h</a>\n## Top x\n'
    )
    assert links(page) == ["docs/a.md", "ui/i.png", "../out.md", "https://e.org", "h.md"]
    assert anchors(page) == {"top-x", "top-x-1"}


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_stays_in_the_repository_and_resolves(page):
    text = page.read_text(encoding="utf-8")
    bad = []
    for target in links(text):
        where, _, fragment = target.partition("#")
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|//", target):
            bad.append(f"{target}: points outside the repository")
            continue
        resolved = (page.parent / where).resolve() if where else page
        if not resolved.is_relative_to(REPO):
            bad.append(f"{target}: leaves the repository")
        elif not resolved.exists():
            bad.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved.read_text("utf-8")):
            bad.append(f"{target}: no heading #{fragment} in {resolved.relative_to(REPO)}")
    assert not bad, f"{page.relative_to(REPO)}:\n" + "\n".join(bad)


# -- (b) no contract citations ------------------------------------------------------------------


def test_documentation_never_cites_the_contract_or_the_workspace():
    text_files = [*DOC_PAGES, *(p for p in EXAMPLES.rglob("*") if p.is_file() and not _is_data(p))]
    bad = []
    for path in text_files:
        if path.suffix not in (".md", ".yaml", ".yml", ".py", ".jsonl"):
            continue
        text = path.read_text(encoding="utf-8")
        # The kebab-docs golden set quotes kebab's own "§" sections verbatim in its snippets.
        forbidden = [r"\bSPEC\b", r"shared/", *([r"§"] if path.suffix == ".md" else [])]
        for pattern in forbidden:
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path.relative_to(REPO)}:{line}: {pattern!r}")
    assert not bad, "\n".join(bad)


def test_golden_format_example_is_a_valid_golden_set(tmp_path):
    page = (REPO / "docs" / "site" / "reference" / "golden-format.md").read_text(encoding="utf-8")
    example = re.search(r"```yaml\n(.*?)```", page, re.S).group(1)
    path = tmp_path / "golden.yaml"
    path.write_text(example, encoding="utf-8")
    loaded = load_golden(path)
    assert loaded.warnings == []
    assert [q.id for q in loaded.golden.queries] == ["install-001", "unans-001"]
    assert not loaded.golden.queries[1].answerable


# -- (c) every example config, from a clone without ../shared ---------------------------------


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The parts of the repository the examples read (docs/examples and the package's bundled
    data), copied to a folder with no ``shared/`` beside or above it."""
    root = tmp_path_factory.mktemp("clone") / "kebab-eval-pipeline"
    shutil.copytree(EXAMPLES, root / "docs" / "examples")
    shutil.copytree(REPO / "kebab_eval_pipeline" / "data", root / "kebab_eval_pipeline" / "data")
    assert not any((parent / "shared").exists() for parent in root.parents)
    return root


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This environment without KEBAB_EVAL_*/DAGSTER_* settings, the repository's code first on
    the path (also for the ``kebab-eval`` and ``dagster`` scripts beside this Python), and a fresh
    DAGSTER_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    home = tmp_path / "dagster_home"
    home.mkdir()
    env["DAGSTER_HOME"] = str(home)
    env["KEBAB_EVAL_INDEX_CACHE"] = str(tmp_path / "indexes")
    return env


# Two demo questions: enough to prove the command example end to end (each query starts two
# processes of ~0.7 s, so the whole demo set would take minutes).
TWO_DEMO_QUERIES = """\
schema_version: "1"
name: demo-two
queries:
  - id: fact-001
    query: "At what temperature should a sourdough starter be kept for a peak in 4-6 hours?"
    supports:
      - rel_path: grains-and-bread/sourdough-starter.md
        heading_path: ["Sourdough Starter", "Feeding schedule"]
  - id: fact-002
    query: "How much salt do I need per kilo of shredded cabbage for sauerkraut?"
    supports:
      - rel_path: vegetables/sauerkraut.md
        heading_path: ["Sauerkraut", "Ingredients and ratio"]
"""


def test_there_are_example_configs_of_every_kind():
    kinds = {load_settings(p).system.kind for p in EXAMPLE_CONFIGS}
    assert kinds == {"reference", "command", "http", "replay"}, kinds


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_config_loads_and_runs_on_a_clone(config, clone, tmp_path):
    """Loads (paths resolved, golden set readable); then runs through the CLI unless it needs a
    server (http) or the `vectors` extra and minutes of embedding (vector/hybrid)."""
    copy = clone / config.relative_to(REPO)
    settings = load_settings(copy)
    golden = load_golden_artifact(settings)
    assert len(golden.queries) > 0, copy
    system = settings.system
    env = clean_env(tmp_path)
    args = ["run", "--config", str(copy), "--baseline", "none"]
    if system.kind == "http":
        return  # needs a running service; loading checked the URLs and the response mapping
    if config == CI_CONFIG:
        return  # run as the README's CI snippet runs it, below
    if system.kind == "reference":
        assert Path(system.corpus or system.index or DEMO_CORPUS).is_dir()
        if system.mode != "lexical":
            return
    elif system.kind == "command":
        # The example names /tmp/demo-index, which its comment says to build; build it privately.
        index = tmp_path / "demo-index"
        built = run_cli(
            ["ref", "index", str(clone / "kebab_eval_pipeline/data/demo/corpus"), "--out", str(index)],
            env=env, timeout=300,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
        copy.write_text(copy.read_text(encoding="utf-8").replace("/tmp/demo-index", str(index)))
        (tmp_path / "two.yaml").write_text(TWO_DEMO_QUERIES)
        args += ["--golden", str(tmp_path / "two.yaml")]
    else:
        assert system.kind == "replay", f"{config}: add this kind of example to the test"
    proc = run_cli(args, env=env, cwd=clone, timeout=300)  # forked ready-imported: tests.forked_cli
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert re.search(r"\berror_rate\W+0\.0000\b", proc.stdout), proc.stdout


# -- (d) the README's CI snippet --------------------------------------------------------------


def ci_snippet() -> str:
    """The CI snippet: the README's "In CI" block, which "A first gate in CI" shows as it is."""
    shown = [s for s in docs_pages.snippets("bash") if "KEBAB_EVAL_CONFIG=docs/examples/ci/" in s.text]
    places = [s.where.split(":")[0] for s in shown]
    assert places == ["README.md", "docs/site/getting-started/ci-gate.md"], places
    assert len({s.text for s in shown}) == 1, "the README and the CI page show different CI snippets"
    return shown[0].text


def test_the_ci_snippet_runs_as_written_on_a_clone(clone, tmp_path):
    snippet = ci_snippet()
    assert "KEBAB_EVAL_CONFIG=" in snippet and "dagster asset materialize" in snippet
    env = clean_env(tmp_path)
    del env["DAGSTER_HOME"]  # the snippet sets its own
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", snippet + 'echo "RUN_ID=$RUN_ID"\n'],
        env=env, cwd=clone, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert re.search(r"^RUN_ID=\S+$", proc.stdout, re.M), proc.stdout
    assert "RUN_SUCCESS" in out, out[-4000:]
    # hit@5 is gated only by the example config: the snippet's config was read.
    assert "Asset check 'gate_hit_at_5_min' on 'run_metrics' passed" in out, out[-4000:]
