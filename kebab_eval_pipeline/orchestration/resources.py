"""Run settings as a Dagster resource: the config file plus per-run overrides.

The same overrides are editable in the launchpad; secrets never live here —
adapters read them from environment variables by name.
"""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.settings import RunSettings, load_settings, settings_from_dict
from kebab_eval_pipeline.storage import ArtifactStore


class EvalSettingsResource(dg.ConfigurableResource):
    """Typed run settings: a YAML config file (SPEC §12) and optional overrides of its keys."""

    config_file: str | None = None
    golden: str | None = None
    system_kind: str | None = (
        None  # reference | command | http | replay; a different kind drops the file's block
    )
    mode: str | None = None
    answers: bool | None = None
    baseline: str | None = None
    k: list[int] | None = None
    chunk_size: int | None = None

    def load(self) -> RunSettings:
        """The effective settings; raises InputError (naming file and key) when invalid."""
        base = load_settings(self.config_file)
        overrides = {
            key: value
            for key, value in (
                ("golden", self.golden),
                ("answers", self.answers),
                ("baseline", self.baseline),
                ("k", self.k),
            )
            if value is not None
        }
        system = {
            key: value
            for key, value in (("mode", self.mode), ("chunk_size", self.chunk_size))
            if value is not None
        }
        if not overrides and not system and self.system_kind in (None, base.system.kind):
            return base
        doc = base.model_dump(exclude_defaults=False)
        doc.update(overrides)
        if self.system_kind not in (None, base.system.kind):
            doc["system"] = {"kind": self.system_kind}
        doc["system"] = {**doc["system"], **system}
        return settings_from_dict(doc, source="run overrides")


class ArtifactStorage(dg.ConfigurableResource):
    """Where run artifacts live (local folder or fsspec URL); the IO manager writes to the same base."""

    base: str

    def store(self) -> ArtifactStore:
        return ArtifactStore(self.base)
