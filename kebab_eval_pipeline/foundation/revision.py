"""The pipeline's own version and git commit, recorded with every run (SPEC §1)."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path


@lru_cache(maxsize=1)
def pipeline_revision() -> str:
    """``<package version>+g<commit>`` in a git checkout, else the package version alone."""
    try:
        version = metadata.version("kebab-eval-pipeline")
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return version
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    return f"{version}+g{commit}" if commit else version
