"""The Dagster webserver as a real process, and what a person sees of it in headless Chromium.

    with dagster_webserver(home, config, log) as server:           # 127.0.0.1, a free port
        mark = server.log_mark()
        with open_dagster(server.url("/assets/run_metrics", partition="ci-1", view="checks")) as visit:
            check_status(visit.page, "gate_mrr_min")                  # ("Succeeded", "check_circle")
            metadata_value(visit.page, "metric/mrr")                  # "0.6901", as the UI shows it
            assert_clean(visit)                                       # no console/page/request errors
        server.assert_no_errors_since(mark)                           # nor in the webserver's log

Selectors follow what Dagster 1.13's UI renders (see the functions below); they are the few places
to update when Dagster changes its markup.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.browser import PageVisit, open_in_chromium
from tests.orchestration.test_crash_recovery import kill_group, log_tail
from tests.systems.adapters.conftest import free_port

LOOPBACK = "127.0.0.1"
VIEWPORT = (1600, 1000)  # wide enough for the metadata table, the check list and its detail side by side
TIMEOUT_MS = 60_000
START_TIMEOUT_S = 90
SCREENSHOTS_ENV = "KEBAB_EVAL_UI_SCREENSHOTS"
#: Dagster's "Join the Dagster community" dialog stays away once the browser has this flag
#: (``useStateWithStorage('communityNux')`` in Dagster's CommunityNux.tsx stores JSON).
DISMISS_COMMUNITY_NUX = "window.localStorage.setItem('communityNux', JSON.stringify('1'));"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LOG_ERROR = re.compile(r"\b(ERROR|CRITICAL)\b|Traceback|Exception")


@dataclass
class Webserver:
    """A running ``dagster-webserver``: its base URL and the file holding its (and its code
    server's) stdout and stderr."""

    proc: subprocess.Popen
    base_url: str
    log: Path

    def url(self, path: str, **query: str) -> str:
        """``base_url + path`` with ``query`` as URL parameters (in the given order)."""
        return self.base_url + path + (f"?{urlencode(query)}" if query else "")

    def log_mark(self) -> int:
        """Where the log ends now: pass it to :meth:`errors_since`."""
        return self.log.stat().st_size

    def errors_since(self, mark: int) -> list[str]:
        """Log lines written after ``mark`` that report an error, colour codes removed."""
        with self.log.open("rb") as f:
            f.seek(mark)
            text = ANSI.sub("", f.read().decode("utf-8", errors="replace"))
        return [line for line in text.splitlines() if LOG_ERROR.search(line)]

    def assert_no_errors_since(self, mark: int) -> None:
        """Fail, listing them, if the webserver logged errors after ``mark``."""
        errors = self.errors_since(mark)
        assert not errors, "the Dagster webserver logged errors while serving the pages:\n" + "\n".join(
            errors
        )


@contextmanager
def dagster_webserver(
    home: Path, env: dict[str, str], log: Path, module: str = "kebab_eval_pipeline"
) -> Iterator[Webserver]:
    """Start ``dagster-webserver`` for the package (``-m kebab_eval_pipeline``; ``module``: another
    code location, e.g. a team project's, found through ``env``'s PYTHONPATH) over the instance in
    ``home`` on a free 127.0.0.1 port, wait until it answers, and stop it afterwards.

    ``env`` is the whole environment (DAGSTER_HOME is set here). Output goes to ``log``; the test
    fails with its end if the server exits or does not answer within START_TIMEOUT_S."""
    port = free_port()
    environment = {**env, "DAGSTER_HOME": str(home), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "dagster_webserver", "-h", LOOPBACK, "-p", str(port)]
    with log.open("wb") as out:
        # Its own process group: the webserver starts a code server, and a kill must reach both.
        proc = subprocess.Popen(
            # the package as `dagster dev -m kebab_eval_pipeline` names it (its `defs` is lazy)
            [*command, "-m", module],
            env=environment,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Webserver(proc, f"http://{LOOPBACK}:{port}", log)
    try:
        _wait_until_serving(server)
        yield server
    finally:
        _stop(proc)


def _wait_until_serving(server: Webserver) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.proc.poll() is not None:
            pytest.fail(f"dagster-webserver exited ({server.proc.returncode}):\n{log_tail(server.log)}")
        try:
            with urllib.request.urlopen(server.url("/server_info"), timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # not listening yet
        if time.monotonic() > deadline:
            pytest.fail(f"dagster-webserver did not answer in {START_TIMEOUT_S} s:\n{log_tail(server.log)}")
        time.sleep(0.25)


def _stop(proc: subprocess.Popen) -> None:
    """Terminate (the webserver then stops its code server), wait, and kill what is left."""
    if proc.poll() is None:
        proc.terminate()
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
    kill_group(proc)  # the code server too, should it outlive the webserver


# ---------------------------------------------------------------------------------------------
# Pages


@contextmanager
def open_dagster(url: str) -> Iterator[PageVisit]:
    """Open a Dagster UI page in headless Chromium without the community dialog in the way.

    The localStorage flag keeps the dialog from opening; should Dagster rename the flag, the
    handler clicks "Skip" whenever the dialog shows up before a playwright action."""
    with open_in_chromium(
        url, viewport=VIEWPORT, timeout_ms=TIMEOUT_MS, init_scripts=[DISMISS_COMMUNITY_NUX]
    ) as visit:
        page = visit.page
        page.add_locator_handler(
            page.get_by_text("Join the Dagster community"),
            lambda: page.get_by_role("button", name="Skip").click(),
        )
        yield visit


def open_tab(page, tab: str) -> None:
    """Click one of an asset page's tabs (Overview, Partitions, Events, Checks, Lineage)."""
    page.get_by_role("tab", name=tab, exact=True).click()


def metadata_row(page, key: str):
    """The visible metadata table row whose first cell is ``key`` (the asset's Overview and the
    partition detail under Partitions both render metadata as such rows)."""
    key_cell = page.locator("td:first-child", has_text=re.compile(f"^{re.escape(key)}$"))
    row = page.locator("tr").filter(has=key_cell).filter(visible=True).first
    row.wait_for()
    return row


def metadata_value(page, key: str) -> str:
    """The text the UI shows as the value of metadata entry ``key``: the row's last non-empty
    cell (the Overview table has key, timestamp, value; the partition detail key, value)."""
    cells = [text.strip() for text in metadata_row(page, key).locator("td").all_inner_texts()[1:]]
    values = [text for text in cells if text]
    assert values, f"metadata row {key!r} has no value: {cells}"
    return values[-1]


def expect_metadata(page, key: str, text: str) -> None:
    """Wait until metadata entry ``key`` shows exactly ``text`` (pages re-render as data arrives)."""
    from playwright.sync_api import expect

    cell = metadata_row(page, key).locator("td", has_text=re.compile(rf"^\s*{re.escape(text)}\s*$"))
    expect(cell, f"metadata {key!r} should show {text!r}").to_have_count(1)


def expect_visible(locator, what: str) -> None:
    """Wait until ``locator`` is visible; ``what`` names it in the failure."""
    from playwright.sync_api import expect

    expect(locator, f"{what} should be visible").to_be_visible()


def expect_text(locator, text: str | list[str], what: str) -> None:
    """Wait until ``locator`` shows exactly ``text`` (a list: its elements, in order, show these);
    ``what`` names it in the failure."""
    from playwright.sync_api import expect

    expect(locator, f"{what} should read {text!r}").to_have_text(text)


def detail_value(page, label: str):
    """The element under a bold label of a detail panel ("Evaluation result", "Partition", …)."""
    return page.get_by_text(label, exact=True).locator("xpath=following-sibling::*[1]")


def partition_list(page):
    """The partition keys listed in the Partitions tab, top to bottom (one locator, many elements):
    the rows of its virtualized list, each a middle-truncated name whose first span is the key."""
    return page.locator('[class*="VirtualizedTable_row"] [title] > span')


def check_status(page, check: str) -> tuple[str, str]:
    """(status word, icon name) of ``check`` in the Checks tab's list, e.g. ("Succeeded",
    "check_circle") or, for a failed warning, ("Failed", "warning_outline")."""
    title = page.locator(f'[title="{check}"]').first
    title.wait_for()
    # The list item: an icon box, then the name and under it the status word.
    item = title.locator("xpath=ancestor::div[.//*[@role='img']][1]")
    status = title.locator("xpath=following-sibling::span[1]").inner_text().strip()
    icon = item.get_by_role("img").first.get_attribute("aria-label") or ""
    return status, icon


def center(locator) -> None:
    """Scroll ``locator`` to the middle of its scrolling container (Dagster scrolls inner panes, so
    screenshots of the viewport show what is scrolled there)."""
    locator.evaluate("e => e.scrollIntoView({block: 'center'})")


def assert_clean(visit: PageVisit, origin: str | None = None) -> None:
    """No console error, uncaught exception, HTTP error or failed request; every blocked request
    (never the page's own ``origin``) was one to another host that the page may not reach."""
    assert visit.console_errors == [], visit.console_messages
    assert visit.page_errors == [], visit.page_errors
    assert visit.error_responses == [], visit.error_responses
    blocked = set(visit.blocked_requests)
    if origin is not None:
        assert not [u for u in blocked if u.startswith(origin)], visit.blocked_requests
        assert all(u.startswith(("http://", "https://")) and LOOPBACK not in u for u in blocked), blocked
    # ERR_ABORTED is the page cancelling its own request: a navigation (page.goto, a link) ends the
    # UI's polling GraphQL queries mid-flight. A server that fails shows as an HTTP error status
    # (error_responses) or a connection error (ERR_CONNECTION_RESET, ERR_EMPTY_RESPONSE), not this.
    failed = [
        f
        for f in visit.failed_requests
        if f.rsplit(": ", 1)[0] not in blocked and not f.endswith(": net::ERR_ABORTED")
    ]
    assert failed == [], visit.failed_requests


def screenshot(visit: PageVisit, name: str, default_dir: Path) -> Path:
    """Save the viewport as ``name``.png: in $KEBAB_EVAL_UI_SCREENSHOTS when set (stable names, for
    docs/ui/), else in ``default_dir``. The viewport, not the full page: Dagster's layout scrolls
    inside an inner element, so a full-page shot is the viewport plus blank space."""
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or default_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = visit.screenshot(folder / f"{name}.png", full_page=False)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000, (path, len(data))
    return path


# ---------------------------------------------------------------------------------------------
# Values as the UI shows them


def js_number(value: float) -> str:
    """``String(value)`` in JavaScript: how the Dagster UI shows float metadata (MetadataEntry.tsx
    renders ``{entry.floatValue}``). Python's ``repr`` finds the same shortest round-trip digits;
    JavaScript places the point differently (``0`` not ``0.0``, ``1e-7`` but ``0.000001``, up to
    21 integer digits before switching to exponents) — ECMAScript's Number::toString."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    parts = Decimal(repr(abs(float(value)))).normalize().as_tuple()
    digits = "".join(map(str, parts.digits))
    k = len(digits)
    n = k + int(parts.exponent)  # value = 0.<digits> × 10^n
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    exponent = f"e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + digits[0] + ("." + digits[1:] if k > 1 else "") + exponent
