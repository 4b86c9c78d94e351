"""The Dagster layer: partitions, assets, gate checks, resources, IO manager, automation.

Partitioned asset checks and observable sources are marked preview/beta in Dagster 1.13;
we rely on them deliberately (per-run gate results and staleness in the UI), so their
warnings are silenced here, before any definition is built.
"""

import warnings

from dagster._utils.warnings import BetaWarning, PreviewWarning

warnings.filterwarnings("ignore", category=PreviewWarning)
warnings.filterwarnings("ignore", category=BetaWarning)
