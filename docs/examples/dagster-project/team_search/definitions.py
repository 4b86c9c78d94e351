"""The team's code location: everything under ``team_search/defs`` — its own assets
(``defs/assets.py``) and two evaluation chains side by side, each a ``defs.yaml``
(``defs/staging``, ``defs/production``; the production chain also gates ``search_index``).

``dagster dev -m team_search.definitions`` and ``dg dev`` / ``dg check defs`` / ``dg list defs``
(``[tool.dg]`` in pyproject.toml) load the same definitions.
"""

from pathlib import Path

import dagster as dg

defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
