"""Stores every asset's value as Parquet per partition via :class:`ArtifactStore`."""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.artifacts import ARTIFACT_TYPES
from kebab_eval_pipeline.storage import ArtifactStore


class ArtifactIOManager(dg.ConfigurableIOManager):
    """Writes ``(tables, info)`` of an artifact atomically under ``base/{asset}/{run_id}/``."""

    base: str

    def _store(self) -> ArtifactStore:
        return ArtifactStore(self.base)

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        asset = context.asset_key.path[-1]
        tables, info = obj.to_tables()
        attempt = self._store().write(asset, context.asset_partition_key, tables, info)
        context.add_output_metadata(
            {"storage_path": f"{self.base}/{asset}/{context.asset_partition_key}/{attempt}"}
        )

    def load_input(self, context: dg.InputContext):
        asset = context.asset_key.path[-1]
        tables, info = self._store().read(asset, context.asset_partition_key)
        return ARTIFACT_TYPES[asset].from_tables(tables, info)
