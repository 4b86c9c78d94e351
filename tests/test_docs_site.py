"""The documentation site (docs/mkdocs.yml) builds strictly and offline, and its generated reference
says what the code says.

One strict build of the real site, shared by the module, is read back: the metrics page against the
metric catalogue, the CLI page against the click command tree, the config page against the settings
models and the system-kind registry, the exit codes against ``foundation.errors``; the search index
and the screenshots are in the built site. A copy of the docs whose page lost its generated
reference fails to build, and a minimal copy of the configuration with planted
defects (a broken link, a missing anchor, a page left out of the nav …) must fail its strict
build, each defect named — so the strictness is real.

The builds run with every HTTP(S) proxy pointing at a closed port: anything fetched would fail the
build. Skipped without the ``docs`` extra, unless KEBAB_EVAL_REQUIRE_DOCS=1.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import EXIT_CODES
from kebab_eval_pipeline.metrics.catalogue import measure, measures
from kebab_eval_pipeline.systems.settings import KINDS, SYSTEM_KINDS
from tests import docs_pages
from tests.conftest import REPO, docs_or_skip
from tests.systems.adapters.conftest import free_port

CONFIG = REPO / "docs" / "mkdocs.yml"
SCREENSHOTS = sorted((REPO / "docs" / "ui").glob("*.png"))
#: Nothing listens on port 9 (discard): a request through these proxies fails at once.
OFFLINE = {
    name: "http://127.0.0.1:9"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
}


@pytest.fixture(scope="module", autouse=True)
def _docs_extra():
    docs_or_skip()


def build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``out``, offline, from the repository's top folder
    (so the hook documents this checkout's package)."""
    env = {**os.environ, **OFFLINE, "no_proxy": "", "NO_PROXY": "", "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@dataclass
class Site:
    root: Path
    log: str
    seconds: float

    def page(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    out = tmp_path_factory.mktemp("docs-site") / "site"
    start = time.perf_counter()
    done = build(CONFIG, out)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stdout + done.stderr
    return Site(out, done.stdout + done.stderr, seconds)


_HEADING = re.compile(r'<h([1-6]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)


def plain(fragment: str) -> str:
    """The text of an HTML fragment (tags dropped, entities decoded, the permalink sign gone)."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("¶", "").strip()


def sections(page: str, level: int) -> dict[str, str]:
    """Heading text → the HTML after it, up to the next heading of ``level`` or higher, for every
    heading of ``level`` in ``page``'s article."""
    article = page[page.index("<article") : page.index("</article>")]
    found = list(_HEADING.finditer(article))
    out = {}
    for i, m in enumerate(found):
        if int(m[1]) != level:
            continue
        end = next((n.start() for n in found[i + 1 :] if int(n[1]) <= level), len(article))
        out[plain(m[3])] = article[m.end() : end]
    return out


def first_cells(fragment: str) -> list[str]:
    """The text of the first cell of every body row of the tables in ``fragment``."""
    return [plain(cell) for cell in re.findall(r"<tr>\s*<td>(.*?)</td>", fragment, re.S)]


def test_the_site_builds_strictly_offline_without_a_warning(site):
    assert "WARNING" not in site.log, site.log
    assert (site.root / "index.html").is_file()
    print(f"site built in {site.seconds:.1f} s")


def test_the_pages_load_nothing_from_the_network(site):
    pages = sorted(site.root.rglob("*.html"))
    assert len(pages) >= 5
    for page in pages:
        remote = re.findall(
            r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]*\"", page.read_text()
        )
        assert not remote, (page.relative_to(site.root), remote)


def test_the_metrics_page_lists_every_measure_with_its_facts(site):
    found = sections(site.page("reference/metrics.html"), 3)
    expected = {f"{m.name}@k" if m.at_k else m.name: m for m in measures()}
    assert set(found) == set(expected)
    direction = {"higher": "higher is better", "lower": "lower is better", "none": "neither"}
    for name, m in expected.items():
        text = plain(found[name])
        for declared in (m.trec_eval, m.ir_measures):
            if declared is not None:
                assert declared.replace("{k}", "k") in text, (name, declared, text)
        if m.trec_eval is None:
            assert "trec_eval: —" in text, (name, text)
        assert m.denominator in text and direction[m.direction] in text, (name, text)
        assert m.description.replace("{k}", "k")[1:] in text, (name, text)
        assert (m.column is None) == ("none: not a mean of per-query scores" in text), (name, text)
    # trec_eval's name of nDCG at a cut-off, as the catalogue declares it
    assert measure("ndcg@10").trec_eval == "ndcg_cut_{k}"
    assert "trec_eval: ndcg_cut_k" in plain(found["ndcg@k"])
    assert "ir_measures: nDCG@k" in plain(found["ndcg@k"])


def _cli_commands() -> dict[str, object]:
    import importlib

    import typer

    from kebab_eval_pipeline.cli.help import walk

    root = typer.main.get_command(importlib.import_module("kebab_eval_pipeline.cli.main").app)
    out = {}
    for path, command in walk(root):
        if not command.hidden:
            out[" ".join(("kebab-eval", *path))] = command
    return out


def test_the_cli_page_lists_every_command_and_option_of_the_command_tree(site):
    found = sections(site.page("reference/cli.html"), 2)
    commands = _cli_commands()
    assert set(found) == set(commands)
    assert {"kebab-eval run", "kebab-eval golden validate", "kebab-eval ref index"} <= set(found)
    for name, command in commands.items():
        text = plain(found[name])
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                assert all(opt in text for opt in [*param.opts, *param.secondary_opts]), (name, param.opts)
        first_line = (command.help or "").strip().splitlines()[0] if command.help else ""
        assert first_line.split("`")[0][:40] in text, (name, first_line)


def test_the_config_page_lists_every_top_level_key_and_every_system_kind(site):
    page = site.page("reference/config.html")
    found = sections(page, 2)
    assert first_cells(found["Top level"]) == list(RunSettings.model_fields)
    assert SYSTEM_KINDS == ("reference", "command", "http", "replay", "python")
    for kind in SYSTEM_KINDS:
        section = found[f"system — kind: {kind}"]
        assert first_cells(section) == [f"system.{name}" for name in KINDS[kind].settings.model_fields]
    # a value, a default and an allowed value read from the models
    top = found["Top level"]
    assert re.search(r"<code>stale_golden</code></td>\s*<td>one of <code>fail</code>, <code>warn</code>", top)
    assert re.search(
        r"<code>k</code></td>\s*<td>list of integer \(≥ 1, ≤ 1000\)</td>\s*<td><code>\[1, 3, 5, 10\]", top
    )


def test_the_config_pages_examples_come_from_the_documentation_and_load(site, tmp_path):
    """The example column quotes the documentation's own configs: most keys have one, and each
    scalar or list example of a top-level key, written alone into a run config, loads."""
    from kebab_eval_pipeline.chain.settings import load_settings

    page = site.page("reference/config.html")
    rows = re.findall(
        r"<tr>\s*<td><code>([^<]+)</code></td>(?:\s*<td>.*?</td>){3}\s*<td>(.*?)</td>\s*</tr>", page, re.S
    )
    assert len(rows) > 150, len(rows)
    skip = ("—", "its keys' own examples, below")
    shown = [(key, plain(example)) for key, example in rows if plain(example) not in skip]
    assert len(shown) >= 0.75 * len(rows), (len(shown), len(rows))
    top = [(key, line) for key, line in shown if key in RunSettings.model_fields and "…" not in line]
    assert len(top) >= 15, top
    for key, line in top:
        assert line.startswith(f"{key}: "), (key, line)
        path = tmp_path / f"{key}.yaml"
        path.write_text(line + "\n", encoding="utf-8")
        load_settings(path)  # raises on a value the config refuses


def test_the_stored_files_page_lists_the_chains_assets_and_the_stores_paths(site):
    from kebab_eval_pipeline.chain.artifacts import STAGES
    from kebab_eval_pipeline.store import layout

    page = site.page("reference/storage.html")
    assets = re.findall(r"<tr>\s*<td><code>(\w+)</code></td>\s*<td><code>", page)
    assert assets == [stage.asset for stage in STAGES]
    for name in (
        layout.MANIFEST,
        layout.PINS_FILE,
        layout.LOCK_DIR,
        layout.REPORTS_DIR,
        layout.JUDGE_CACHE_FILE,
    ):
        assert name in page, name
    assert "$DAGSTER_HOME/kebab-eval/artifacts" in page and "~/.cache" in page


def test_the_exit_codes_page_is_the_cli_mapping(site):
    rows = re.findall(
        r"<tr>\s*<td><code>(\d+)</code></td>\s*<td>(.*?)</td>", site.page("reference/exit-codes.html"), re.S
    )
    assert [int(code) for code, _ in rows] == [int(code) for code in EXIT_CODES]
    for (_, meaning), expected in zip(rows, EXIT_CODES.values(), strict=True):
        assert plain(meaning) == expected.replace("`", "")


def test_the_layout_page_lists_every_module_in_the_order_of_the_layers(site):
    """Every module of the package is a row under its package's heading; the packages follow the
    layers (a package's first layer), each subpackage right after its parent."""
    import kebab_eval_pipeline
    from kebab_eval_pipeline.layers import IGNORED, LAYERS

    root = Path(kebab_eval_pipeline.__file__).parent
    page = site.page("development/layout.html")
    headings = [plain(h) for h in re.findall(r"<h2 id=\"[^\"]*\">(.*?)<a class=\"headerlink\"", page, re.S)]
    expected_modules = {
        (p.parent.relative_to(root.parent).as_posix() + "/", p.name)
        for p in root.rglob("*.py")
        if p.name != "__init__.py"
        and "__pycache__" not in p.parts
        and p.relative_to(root).parts[0] not in IGNORED
    }
    found = set()
    for heading, body in zip(headings, re.split(r"<h2 id=", page)[1:], strict=True):
        found |= {(heading, plain(name)) for name in re.findall(r"<tr>\s*<td><code>([^<]+)</code>", body)}
    assert found == expected_modules, (expected_modules - found, found - expected_modules)
    tops = [h.split("/")[1] for h in headings[1:]]
    layer_of = {}
    for rank, layer in enumerate(LAYERS):
        for entry in layer:
            layer_of.setdefault(entry.split(".")[0], rank)
    ranks = [layer_of[t] for t in tops]
    assert ranks == sorted(ranks), list(zip(tops, ranks, strict=True))


def test_search_index_holds_the_reference_and_no_contract_citation(site):
    docs = json.loads(site.page("search/search_index.json"))["docs"]
    ndcg = [d for d in docs if d["location"] == "reference/metrics.html#metric-ndcg-at-k"]
    assert ndcg and "ndcg_cut_k" in ndcg[0]["text"]
    assert any("over_refusal_rate" in d["title"] for d in docs)
    for d in docs:
        assert not re.search(r"\bSPEC\b|§", d["title"] + d["text"]), d["location"]


def test_the_screenshots_are_in_the_site_and_linked_from_their_repository_path(site):
    assert SCREENSHOTS
    for png in SCREENSHOTS:
        assert (site.root / "ui" / png.name).read_bytes() == png.read_bytes()
    # index.md links ../ui/asset_graph.png (its place in the repository); the site has it at ui/
    assert '<img alt="The evaluation chain' in site.page("index.html")
    assert re.search(r'<img alt="[^"]*" src="ui/asset_graph.png"', site.page("index.html"))


def test_the_built_site_searches_in_headless_chromium_and_loads_nothing_from_elsewhere(site, tmp_path):
    """The built site served as static files (``python -m http.server``, as the README says), opened
    in headless Chromium: the theme's search finds a metric typed into its box, a recipe page and
    the generated metrics reference render, and no page asks for anything beyond the site. The two
    pages are saved as screenshots ($KEBAB_EVAL_UI_SCREENSHOTS=docs/ui for the documentation)."""
    from tests.browser import open_in_chromium as chromium
    from tests.browser import shared_chromium

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "-d", str(site.root), "--bind", "127.0.0.1", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    shots = Path(os.environ.get("KEBAB_EVAL_UI_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    try:
        _get(f"{base}/index.html", 30, server)
        with shared_chromium():  # skips (or fails) without the browser extra
            from playwright.sync_api import TimeoutError as PlaywrightTimeout

            with chromium(f"{base}/index.html", timeout_ms=60_000) as visit:
                page = visit.page
                box = page.locator("input.md-search__input")
                box.click()
                results = page.locator(".md-search-result__item a")
                # typed key by key, as a reader types; typed again should the first keys arrive
                # before the search index (loaded by a web worker) is ready
                for _attempt in range(3):
                    box.fill("")
                    box.press_sequentially("over_refusal_rate", delay=30)
                    try:
                        results.first.wait_for(timeout=20_000)
                        break
                    except PlaywrightTimeout:
                        continue
                else:
                    pytest.fail("the site's search showed no result for over_refusal_rate")
                hrefs = [results.nth(i).get_attribute("href") for i in range(results.count())]
                assert any("reference/metrics.html" in h for h in hrefs), hrefs
                visit.screenshot(shots / "docs_site_search.png", full_page=False)
                assert not visit.blocked_requests and not visit.console_errors and not visit.page_errors, (
                    visit.blocked_requests,
                    visit.console_errors,
                    visit.page_errors,
                )
            with chromium(f"{base}/recipes/llamaindex.html", timeout_ms=60_000) as visit:
                title = visit.page.locator("article h1").inner_text()
                assert title.startswith("LlamaIndex"), title
                assert visit.page.locator("article pre code").count() >= 3  # mapping, recipe, config
                visit.screenshot(shots / "docs_site_recipe.png", full_page=False)
                assert not visit.blocked_requests and not visit.console_errors, visit.blocked_requests
    finally:
        _stop(server)
    for name in ("docs_site_search.png", "docs_site_recipe.png"):
        data = (shots / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000, (name, len(data))


def test_a_page_that_loses_its_generated_reference_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("examples", "deploy", "ui", "build"))
    (docs / "ui").symlink_to(REPO / "docs" / "ui")
    metrics = docs / "site" / "reference" / "metrics.md"
    metrics.write_text(metrics.read_text(encoding="utf-8").replace("<!-- generated: metrics -->", ""))
    done = build(docs / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no page holds <!-- generated: NAME --> for metrics" in done.stdout + done.stderr


def test_a_broken_link_missing_anchor_or_left_out_page_fails_the_strict_build(tmp_path):
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config.pop("hooks")  # the generated reference needs the real pages: these are the validation's
    config["docs_dir"] = "pages"
    config["nav"] = [{"Home": "index.md"}, {"Missing": "missing.md"}]
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "index.md").write_text(
        "# Home\n\n[gone](nowhere.md) [anchor](#no-such-heading) [other](other.md#nope)\n"
        "[folder](somewhere) [absolute](/abs.md)\n",
        encoding="utf-8",
    )
    (pages / "other.md").write_text("# Other\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    log = done.stdout + done.stderr
    assert done.returncode != 0, log
    planted = [
        "contains a link 'nowhere.md', but the target is not found",
        "contains a link '#no-such-heading', but there is no such anchor",
        "contains a link 'other.md#nope', but the doc 'other.md' does not contain an anchor",
        "contains an unrecognized relative link 'somewhere'",
        "contains an absolute link '/abs.md'",
        "A reference to 'missing.md' is included in the 'nav' configuration, which is not found",
        'exist in the docs directory, but are not included in the "nav" configuration',
    ]
    warnings = [line for line in log.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == len(planted), log
    for message in planted:
        assert any(message in w for w in warnings), (message, log)
    assert f"Aborted with {len(planted)} warnings in strict mode" in log, log


# -- the README's commands, as written ------------------------------------------------------------


def readme_docs_commands() -> list[str]:
    """The command lines of the ```bash block of the README's "Documentation", comments cut."""
    block = docs_pages.snippet("bash", "mkdocs build -f docs/mkdocs.yml").text
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _get(url: str, deadline_s: float, proc: subprocess.Popen) -> bytes:
    """``url``'s body, retried until the server started by ``proc`` answers (or ``proc`` ends)."""
    import urllib.error
    import urllib.request

    end = time.monotonic() + deadline_s
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: no proxy
    while True:
        try:
            with opener.open(url, timeout=5) as response:
                return response.read()
        except (urllib.error.URLError, ConnectionError):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < end, f"{url} did not answer in {deadline_s} s"
            time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def test_the_readme_commands_build_serve_and_search_the_site_as_written():
    """The README's install line names this extra; its `mkdocs build` line, run as written from the
    top folder, writes the site to docs/build/ (what its comment says), which the README's
    `python -m http.server -d docs/build` serves with its search index; its `mkdocs serve` line
    previews it (given a free address: 8000 may be taken on a test machine)."""
    install, serve, build_line = readme_docs_commands()
    assert install == 'pip install -e ".[docs]"'
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    docs_extra = extras["project"]["optional-dependencies"]["docs"]
    assert {re.split(r"[<>=]", d)[0] for d in docs_extra} == {"mkdocs", "mkdocs-material"}

    env = {**os.environ, **OFFLINE, "no_proxy": "", "NO_PROXY": "", "NO_MKDOCS_2_WARNING": "1"}
    mkdocs = [sys.executable, "-m", "mkdocs"]
    assert build_line.split()[:2] == ["mkdocs", "build"], build_line
    built = REPO / "docs" / "build"
    shutil.rmtree(built, ignore_errors=True)
    done = subprocess.run(
        [*mkdocs, *build_line.split()[1:]], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (built / "reference" / "metrics.html").is_file()

    # served as static files, as the README says, on the port the OS gives (0)
    statics = re.search(r"`(python -m http\.server -d docs/build)`", (REPO / "README.md").read_text())[1]
    proc = subprocess.Popen(
        [sys.executable, *statics.split()[1:], "--bind", "127.0.0.1", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
        port = re.search(r"port (\d+)", line)[1]
        index = json.loads(_get(f"http://127.0.0.1:{port}/search/search_index.json", 30, proc))
        assert any("over_refusal_rate" in d["title"] for d in index["docs"])
    finally:
        _stop(proc)

    # the preview server
    assert serve.split()[:2] == ["mkdocs", "serve"], serve
    port = free_port()
    proc = subprocess.Popen(
        [*mkdocs, *serve.split()[1:], "-a", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page = _get(f"http://127.0.0.1:{port}/reference/exit-codes.html", 120, proc).decode()
        assert "<code>130</code>" in page
    finally:
        _stop(proc)


def test_the_home_page_install_line_is_the_readme_first_command():
    """docs/site/index.md's command is the README's first set-up command (which CI runs), word for word."""
    index = (REPO / "docs" / "site" / "index.md").read_text(encoding="utf-8")
    (line,) = [
        x.split("#", 1)[0].strip() for x in re.search(r"```bash\n(.*?)```", index, re.S)[1].splitlines()
    ]
    assert f"\n{line}\n" in docs_pages.section("Set-up: two commands")
