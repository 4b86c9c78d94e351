"""Headless Chromium for tests: open a file or URL, record what went wrong, take screenshots.

Playwright (the ``browser`` extra) drives the machine's own Chromium — Debian's ``chromium``
package — through ``executable_path``: playwright's own browser download (``playwright install``)
comes from a CDN these machines cannot reach.

    from tests.browser import open_in_chromium

    with open_in_chromium(tmp_path / "comparison.html") as visit:
        assert visit.console_errors == [] and visit.page_errors == []
        box = visit.page.locator("#chart-deltas svg").bounding_box()
        visit.screenshot(tmp_path / "comparison.png")

Every request outside the allowed URL prefixes (by default: ``file://`` for a file, the origin for
an http(s) URL) is recorded in ``blocked_requests`` and aborted, so a page under test never
reaches the network. ``init_scripts`` run in every page before its own scripts (e.g. to set a
``localStorage`` flag a web app reads at start-up). When playwright or Chromium is missing the
test is skipped — unless ``KEBAB_EVAL_REQUIRE_BROWSER=1`` (set by CI), where it fails instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

REQUIRE_ENV = "KEBAB_EVAL_REQUIRE_BROWSER"
#: Root in CI containers: Chromium's sandbox needs user namespaces it does not get there.
#: /dev/shm is tiny in containers; background networking is Chromium's own traffic, not the page's.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking")


def chromium_executable() -> str | None:
    """Path of the system Chromium (``chromium`` on Debian, ``chromium-browser`` elsewhere) or None."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _unavailable(reason: str) -> None:
    """Skip the test — or fail it when CI requires the browser tests to run."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


def require_browser() -> str:
    """The Chromium executable; skips (fails under ``KEBAB_EVAL_REQUIRE_BROWSER=1``) when playwright
    or Chromium is missing."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append('playwright (pip install -e ".[browser]")')
    executable = chromium_executable()
    if executable is None:
        missing.append("chromium (apt-get install chromium)")
    if missing:
        _unavailable("headless browser unavailable, missing: " + "; ".join(missing))
    assert executable is not None
    return executable


@dataclass
class PageVisit:
    """One page opened in headless Chromium and everything it reported while loading.

    ``page`` is the live playwright ``Page`` (valid inside the ``with`` block). Lists hold, in
    order: ``requests`` every URL requested (the page itself first), ``blocked_requests`` those
    outside the allowed prefixes (aborted), ``failed_requests`` "url: reason" for every request
    that failed (blocked ones included), ``error_responses`` "status url" for every HTTP response
    with status 400 or above (the request went through, the server answered with an error),
    ``console_messages`` "type: text" for every console message, ``console_errors`` the text of
    the error ones, ``page_errors`` uncaught exceptions.
    """

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    blocked_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    error_responses: list[str] = field(default_factory=list)
    console_messages: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def screenshot(self, path: str | Path, full_page: bool = True) -> Path:
        """Save a PNG of the page (the whole scrollable page by default); returns its path."""
        path = Path(path)
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


def _target_url(target: str | Path) -> str:
    if isinstance(target, Path) or "://" not in str(target):
        return Path(target).resolve().as_uri()
    return str(target)


def _default_allowed(url: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    if parts.scheme == "file":
        return ("file://",)
    return (f"{parts.scheme}://{parts.netloc}/",)


#: The browser of the innermost active :func:`shared_chromium` block, if any.
_SHARED: list[Any] = []


def _launch(p: Any, executable: str) -> Any:
    """Launch headless ``executable`` under playwright ``p``; skips (or fails) when it will not start."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        return p.chromium.launch(executable_path=executable, headless=True, args=list(CHROMIUM_ARGS))
    except PlaywrightError as exc:
        _unavailable(f"{executable} did not start under playwright: {exc}")


@contextmanager
def shared_chromium() -> Iterator[None]:
    """One headless Chromium for every :func:`open_in_chromium` inside the block (e.g. a module of
    UI tests): starting playwright's driver and the browser costs ~1.5 s a visit. Each visit still
    gets a browser context of its own — its own storage, cookies, routes and listeners — as a new
    browser would give it. Skips (or fails, see :func:`require_browser`) when unavailable."""
    executable = require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, executable)
        _SHARED.append(browser)
        try:
            yield
        finally:
            _SHARED.remove(browser)
            browser.close()


@contextmanager
def open_in_chromium(
    target: str | Path,
    *,
    allow: Sequence[str] | None = None,
    viewport: tuple[int, int] = (1280, 900),
    timeout_ms: int = 15_000,
    wait_until: str = "load",
    init_scripts: Sequence[str] = (),
) -> Iterator[PageVisit]:
    """Open ``target`` (a file path or URL) in headless Chromium and yield the :class:`PageVisit`.

    ``allow``: URL prefixes the page may request (default: ``file://`` for files, the target's
    origin for http(s)); anything else is aborted and listed in ``blocked_requests``.
    ``init_scripts``: JavaScript run in every page before the page's own scripts. Skips (or
    fails, see :func:`require_browser`) when the browser is unavailable or will not start. Inside
    a :func:`shared_chromium` block the page opens in a new context of that block's browser, else
    in a browser launched for this visit.
    """
    url = _target_url(target)
    allowed = tuple(allow) if allow is not None else _default_allowed(url)
    visit = (url, allowed, viewport, timeout_ms, wait_until, init_scripts)
    if _SHARED:
        with _visit(_SHARED[-1], *visit) as opened:
            yield opened
        return
    executable = require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = _launch(p, executable)
        try:
            with _visit(browser, *visit) as opened:
                yield opened
        finally:
            browser.close()


@contextmanager
def _visit(
    browser: Any,
    url: str,
    allowed: tuple[str, ...],
    viewport: tuple[int, int],
    timeout_ms: int,
    wait_until: str,
    init_scripts: Sequence[str],
) -> Iterator[PageVisit]:
    """``url`` opened in a new context of ``browser`` (closed afterwards), with the listeners of
    :class:`PageVisit` and requests outside ``allowed`` aborted."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    try:
        context.set_default_timeout(timeout_ms)
        for script in init_scripts:
            context.add_init_script(script)
        page = context.new_page()
        visit = PageVisit(page=page, url=url)

        def route(route) -> None:
            request_url = route.request.url
            if request_url.startswith(allowed):
                route.continue_()
            else:
                visit.blocked_requests.append(request_url)
                route.abort("blockedbyclient")

        # Listeners go on before navigation so the page's first requests and messages count.
        context.route("**/*", route)
        page.on("request", lambda r: visit.requests.append(r.url))
        page.on("requestfailed", lambda r: visit.failed_requests.append(f"{r.url}: {r.failure}"))

        def response(resp) -> None:
            if resp.status >= 400:
                visit.error_responses.append(f"{resp.status} {resp.url}")

        page.on("response", response)
        page.on("pageerror", lambda e: visit.page_errors.append(str(e)))

        def console(message) -> None:
            visit.console_messages.append(f"{message.type}: {message.text}")
            if message.type == "error":
                visit.console_errors.append(message.text)

        page.on("console", console)
        page.goto(url, wait_until=wait_until, timeout=timeout_ms)
        yield visit
    finally:
        context.close()
