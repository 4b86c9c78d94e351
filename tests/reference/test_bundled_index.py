"""The bundled demo corpus's index, shipped with the package (``reference.cache.BUNDLED_DIR``).

A first demo run loads it instead of building. It must be exactly what a build makes now: an entry
that no longer matches would either never be found (a changed key: every demo run builds again,
silently slower) or — were the key not to change — answer with another index. To refresh it after
a deliberate change of the demo corpus, the parser, the chunker, the tokenizer or the index format:

    KEBAB_EVAL_REFRESH_BUNDLED_INDEX=1 pytest -n 0 -q tests/reference/test_bundled_index.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.reference.cache import BUNDLED_DIR, cache_key, cached_index
from kebab_eval_pipeline.reference.index import ReferenceIndex

REFRESH_ENV = "KEBAB_EVAL_REFRESH_BUNDLED_INDEX"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_bundled_demo_index_is_what_a_build_makes_now(tmp_path: Path) -> None:
    key = cache_key(DEMO_CORPUS, 800, 0, False)  # the reference system's defaults
    built = tmp_path / key
    ReferenceIndex.build(DEMO_CORPUS).save(built)
    if os.environ.get(REFRESH_ENV):
        shutil.rmtree(BUNDLED_DIR, ignore_errors=True)
        shutil.copytree(built, BUNDLED_DIR / key)
    assert sorted(p.name for p in BUNDLED_DIR.iterdir()) == [key], (
        f"the bundled index is not the demo corpus's current entry: refresh it ({REFRESH_ENV}=1)"
    )
    bundled = _files(BUNDLED_DIR / key)
    assert sorted(bundled) == sorted(_files(built))
    changed = [name for name, data in _files(built).items() if bundled[name] != data]
    assert not changed, f"bundled index files differ from a build: {changed}; refresh it ({REFRESH_ENV}=1)"


def test_an_empty_cache_loads_the_bundled_demo_index_and_builds_other_settings(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    index, hit = cached_index(DEMO_CORPUS, cache_dir=cache)
    assert hit and not cache.exists()  # loaded from the package: nothing built, nothing written
    assert index.manifest["n_chunks"] == 463 and index.chunker_version == "md-heading-2:size=800:overlap=0"
    assert index.search("kimchi brine salt", k=3)  # a working index: it answers
    other, hit = cached_index(DEMO_CORPUS, chunk_size=300, cache_dir=cache)
    assert not hit and other.chunker_version == "md-heading-2:size=300:overlap=0"
    assert [p.name for p in cache.iterdir()] == [cache_key(DEMO_CORPUS, 300, 0, False)]
