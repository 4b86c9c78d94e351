"""The link to the full report that the PR comment and the job summary end with: the URL given
(``--report-url``), else the CI job's page built from the variables the CI runner sets — GitHub
Actions' run page (``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID``, where
the uploaded reports are) or GitLab's job page (``$CI_JOB_URL``, with its artifacts). Only those
variables are read; nothing else of the environment reaches an output.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlsplit, urlunsplit

from kebab_eval_pipeline.foundation.errors import InputError, Offender

# Characters a Markdown link destination cannot hold as they are (space, parentheses, angle
# brackets, backslash, backticks): percent-encoded, so the link stays one link.
_SAFE = "".join(chr(c) for c in range(33, 127) if chr(c) not in ' ()<>\\`"')


def clean_url(url: str, source: str) -> str:
    """``url`` checked (absolute http/https with a host: else InputError naming ``source``), its user
    info (``user:token@``) dropped — a credential never reaches a comment — and the characters that
    would end a Markdown link percent-encoded."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("bad report URL", [Offender(source, f"{url!r}: expected an absolute http(s) URL")])
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return quote(urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), safe=_SAFE)


def report_link(explicit: str | None, environ: Mapping[str, str]) -> str | None:
    """The full report's URL: ``explicit`` (``--report-url``), else the GitHub Actions run page,
    else the GitLab job page, else None (no link). A malformed URL is an InputError naming its source."""
    if explicit is not None:
        return clean_url(explicit, "--report-url")
    server, repo, run = (environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        return clean_url(f"{server.rstrip('/')}/{repo}/actions/runs/{run}", "$GITHUB_SERVER_URL")
    if environ.get("CI_JOB_URL"):
        return clean_url(environ["CI_JOB_URL"], "$CI_JOB_URL")
    return None
