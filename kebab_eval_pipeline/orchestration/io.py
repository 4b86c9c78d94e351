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
        files = obj.to_files() if hasattr(obj, "to_files") else {}
        store = self._store()
        attempt = store.write(asset, context.asset_partition_key, tables, info, files=files)
        meta: dict = {"storage_path": f"{self.base}/{asset}/{context.asset_partition_key}/{attempt}"}
        for name in sorted(files):
            # e.g. report_html → .../comparison_report/<run>/<attempt>/comparison.html
            path = store.file_path(asset, context.asset_partition_key, name)
            meta[f"report_{name.rsplit('.', 1)[-1]}"] = dg.MetadataValue.path(path)
        context.add_output_metadata(meta)

    def load_input(self, context: dg.InputContext):
        asset = context.asset_key.path[-1]
        tables, info = self._store().read(asset, context.asset_partition_key)
        return ARTIFACT_TYPES[asset].from_tables(tables, info)
