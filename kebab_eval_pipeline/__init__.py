"""kebab-eval-pipeline: evaluate RAG and search systems against golden query sets, as Dagster partitions.

``defs`` is the code location (``dagster dev -m kebab_eval_pipeline``), loaded lazily so that
importing a submodule never builds it; its gates come from the YAML named by
``KEBAB_EVAL_CONFIG`` (defaults: the bundled demo).
"""

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    from kebab_eval_pipeline.definitions import defs_from_environment

    return defs_from_environment()


__all__ = ["defs"]
