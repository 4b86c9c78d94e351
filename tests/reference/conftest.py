"""Shared fixtures: a small English + Korean corpus written to a temp folder.

Line numbers in the tests refer to these exact texts, so edit both together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.index import ReferenceIndex
from tests.conftest import vectors_or_skip

KIMCHI_MD = """\
---
title: 김치 담그기
tags: [korean, fermentation]
---

# 김치

김치는 배추를 소금에 절여 양념과 버무린 한국의 발효 음식이다.

## 절이기

배추를 반으로 갈라 소금물에 여섯 시간 절인다.

### 소금물 농도

소금물 농도는 물 1리터에 소금 100그램으로 약 10퍼센트가 알맞다.

## 양념

고춧가루, 마늘, 생강, 젓갈을 섞어 양념을 만든다.
"""

SOURDOUGH_MD = """\
# Sourdough

Sourdough bread is leavened by a wild yeast starter instead of commercial yeast.

## Starter

Feed the starter with equal weights of flour and water every day.
Keep it at room temperature.

```python
# not a heading
hydration = 1.0
```

~~~
# also not a heading
~~~

## Baking

Bake the loaf at 230 degrees Celsius for forty minutes.
Let it cool for an hour before slicing.
"""

# 30 paragraphs of 84-85 characters: a section far longer than 800 characters.
LONG_PARAGRAPHS = [
    f"Paragraph {i:02d}: kombucha brewing note number {i:02d} about tea, sugar and the scoby culture."
    for i in range(30)
]
KOMBUCHA_MD = (
    "# Kombucha\n\n## Long notes\n\n"
    + "\n\n".join(LONG_PARAGRAPHS)
    + "\n\n## Bottling\n\nBottle the kombucha with a little fruit juice for a second fermentation.\n"
)
# Line numbers in KOMBUCHA_MD: paragraph i sits on line 5 + 2*i; "## Bottling" on line 65.

NOTES_TXT = "Plain text notes about miso.\n# this is not a heading in a text file\n"
BRINE_PY = "# brine calculator\ndef brine_ratio(salt, water):\n    return salt / water\n"

CORPUS = {
    "korean/kimchi.md": KIMCHI_MD,
    "english/sourdough.md": SOURDOUGH_MD,
    "english/kombucha.md": KOMBUCHA_MD,
    "notes.txt": NOTES_TXT,
    "tools/brine.py": BRINE_PY,
    "korean/empty.md": "",
}


def write_corpus(root: Path, files: dict[str, str] | None = None) -> Path:
    """Write ``files`` (default: :data:`CORPUS`) under ``root`` and return ``root``."""
    for rel, text in (CORPUS if files is None else files).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def make_corpus():
    """The :func:`write_corpus` helper, as a fixture (test modules should not import conftest)."""
    return write_corpus


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus")


@pytest.fixture(scope="module")
def built_index(tmp_path_factory: pytest.TempPathFactory) -> ReferenceIndex:
    root = write_corpus(tmp_path_factory.mktemp("corpus"))
    return ReferenceIndex.build(root)


@pytest.fixture(scope="session")
def vector_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("vector-corpus"))


@pytest.fixture(scope="session")
def vector_index(vector_corpus: Path) -> ReferenceIndex:
    """The fixture corpus indexed with real MiniLM embeddings (built once per test session)."""
    vectors_or_skip()
    return ReferenceIndex.build(vector_corpus, with_vectors=True)


@pytest.fixture
def needs_vectors() -> None:
    vectors_or_skip()
