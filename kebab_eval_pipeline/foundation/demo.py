"""The bundled demo: a fermentation-handbook corpus and its golden set (``kebab-eval run`` with no
config evaluates the reference system over them)."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).parents[1] / "data" / "demo"
DEMO_GOLDEN = DEMO_DIR / "golden.yaml"
DEMO_CORPUS = DEMO_DIR / "corpus"
