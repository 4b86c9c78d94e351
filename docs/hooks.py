"""MkDocs hooks of the documentation site (docs/mkdocs.yml).

- **Generated reference.** A page holds ``<!-- generated: NAME -->`` where the reference that
  :data:`reference_pages.PAGES` makes under NAME goes, built from the code each time the site is
  (metrics from the catalogue, config keys from the settings models, commands from the CLI, exit
  codes from ``foundation.errors``), so it cannot drift. Each NAME must be placed exactly once: a
  page that loses its marker fails the build rather than its reference.
- **Files of the repository.** The screenshots (docs/ui/*.png), the example configs and programs
  (docs/examples/, Markdown aside: the bundled corpus is data, not pages) and the deployment files
  (docs/deploy/) stay where they are and are added to the site as ui/…, examples/… and deploy/…, so
  a reader of the built site can open or download what a page links. A page links one by its path
  in the repository (``../../examples/ci/eval.yaml`` from docs/site/recipes/, which GitHub and
  tests/test_docs.py follow); that link is rewritten to the file's place in the site before MkDocs
  checks it.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

# docs/reference_pages.py: MkDocs puts this file's folder on sys.path while it loads the hook.
import reference_pages
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

DOCS = Path(__file__).resolve().parent
#: Folders of the repository added to the site: the folder → its place in the site.
ADDED = {DOCS / "ui": "ui", DOCS / "examples": "examples", DOCS / "deploy": "deploy"}

_MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->")
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_LINK_TARGET = re.compile(r"(\]\(\s*<?)([^)\s>]+)")
_CONTRACT = re.compile(r"\bSPEC\b|§")

#: NAME → the page it was placed on, in this build (``mkdocs serve`` builds again and again).
_placed: dict[str, str] = {}


def on_pre_build(config) -> None:
    """A new build: no reference placed yet."""
    _placed.clear()


def on_files(files, config):
    """The files of :data:`ADDED` folders, as static files of the site (Markdown left out: MkDocs
    would make each a page)."""
    for folder, uri in ADDED.items():
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".md"):
            if "__pycache__" in path.parts:
                continue
            site_uri = f"{uri}/{path.relative_to(folder).as_posix()}"
            files.append(File.generated(config, site_uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Links into :data:`ADDED` folders rewritten to the site; markers replaced by their reference."""
    markdown = _outside_fences(markdown, lambda text: _site_links(text, page))
    return _MARKER.sub(lambda m: _generated(m[1], page.file.src_uri), markdown)


def on_env(env, config, files):
    """Every page's markdown has been read: each reference must have found its page."""
    missing = sorted(set(reference_pages.PAGES) - set(_placed))
    if missing:
        raise PluginError(f"no page holds <!-- generated: NAME --> for {', '.join(missing)}")
    return env


def _generated(name: str, src_uri: str) -> str:
    if name not in reference_pages.PAGES:
        raise PluginError(
            f"{src_uri}: unknown generated reference {name!r}; known: {sorted(reference_pages.PAGES)}"
        )
    if name in _placed:
        raise PluginError(f"{src_uri}: the {name!r} reference is already on {_placed[name]}")
    _placed[name] = src_uri
    text = reference_pages.PAGES[name]()
    # The code's docstrings and comments may cite the project contract; the documentation never does
    # (reference_pages drops the parenthesised citations; any other form stops the build).
    found = _CONTRACT.search(text)
    if found:
        line = text[: found.start()].rsplit("\n", 1)[-1] + text[found.start() :].split("\n", 1)[0]
        raise PluginError(f"{src_uri}: the generated {name!r} reference cites the contract: {line!r}")
    return text


def _outside_fences(markdown: str, change) -> str:
    """``change`` applied to the text between fenced code blocks (code shows links as written)."""
    out, start = [], 0
    for fence in _FENCE.finditer(markdown):
        out += [change(markdown[start : fence.start()]), fence[0]]
        start = fence.end()
    return "".join([*out, change(markdown[start:])])


def _site_links(text: str, page) -> str:
    here = Path(page.file.abs_src_path).parent

    def rewrite(m: re.Match[str]) -> str:
        target = m[2]
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path or target.startswith("/"):
            return m[0]
        path = (here / parts.path).resolve()
        for folder, uri in ADDED.items():
            if path.is_relative_to(folder):
                site_uri = f"{uri}/{path.relative_to(folder).as_posix()}"
                new = get_relative_url(site_uri, page.file.src_uri)
                return m[1] + new + (f"#{parts.fragment}" if parts.fragment else "")
        return m[0]

    return _LINK_TARGET.sub(rewrite, text)
