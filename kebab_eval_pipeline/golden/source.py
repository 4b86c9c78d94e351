"""The mapping form of a run config's ``golden:``: where a golden set is and how to read it.

``golden: FILE_OR_FOLDER`` stays the common form. A standard IR dataset needs a few words more::

    golden: {path: datasets/scifact, split: dev}                    # a BEIR folder
    golden: {queries: topics.301-350, qrels: qrels.301-350, query_field: description}
    golden: {queries: queries.tsv, qrels: qrels.json}                # ranx / ir_measures qrels
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import model_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.golden.datasets import DEFAULT_SPLIT, DatasetOptions
from kebab_eval_pipeline.golden.formats import FORMATS

#: ``golden.format``: ``auto`` or a format a reader declares (:mod:`.formats`).
GoldenFormat = Literal[FORMATS]  # type: ignore[valid-type]


class GoldenSource(StrictSettings):
    """A golden set given as a mapping: one ``path`` (file or folder), or a ``queries`` file with
    its ``qrels``; the ``format`` (sniffed by default), a BEIR folder's ``split`` and the topic
    field that becomes the query (``query_field``: title or description)."""

    path: str | None = None
    queries: str | None = None
    qrels: str | None = None
    format: GoldenFormat = "auto"
    split: str = DEFAULT_SPLIT
    query_field: Literal["title", "description"] = "title"

    @model_validator(mode="after")
    def _one_way(self) -> GoldenSource:
        if self.path is not None and (self.queries is not None or self.qrels is not None):
            raise ValueError("give either 'path' or 'queries' + 'qrels', not both")
        if self.path is None and (self.queries is None or self.qrels is None):
            raise ValueError("give 'path' (a file or folder), or both 'queries' and 'qrels'")
        for name in ("path", "queries", "qrels"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ValueError(f"{name}: empty")
        problems = self.options().problems()
        if problems:
            raise ValueError(problems[0].reason)
        return self

    def paths(self) -> list[Path]:
        """The files (or folder) to read, in the order given."""
        if self.path is not None:
            return [Path(self.path)]
        return [Path(self.queries or ""), Path(self.qrels or "")]

    def options(self) -> DatasetOptions:
        return DatasetOptions(split=self.split, query_field=self.query_field)
