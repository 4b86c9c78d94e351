"""The package's layers, lowest first: each module imports only its own layer and the layers before it.

The package reads top-down, in the order a query travels: golden sets, systems, matching and
metrics, comparison, reports, orchestration and the command line. ``tests/test_layout.py`` fails on
an import against this order (inside functions too) and on any import circle; the documentation's
layout page lists the package in this order.
"""

from __future__ import annotations

#: Layers, lowest first: a module may import its own layer and the layers before it. Each entry
#: names top-level modules or subpackages of the package.
LAYERS: tuple[tuple[str, ...], ...] = (
    # this declaration; files, paths, ids, YAML, errors, limits: no knowledge of evaluation
    ("__init__", "layers", "foundation"),
    ("golden",),
    ("contract",),  # what every system under test returns: hits, answers, citations, system info
    ("reference",),  # the reference RAG system: a system under test of its own, not an adapter
    ("systems",),  # adapters, the runner, versions, identity
    ("metrics",),  # matching, column kernels, the catalogue, per-query scores, aggregates, health
    ("golden_health",),  # the golden set's own health: duplicates, leakage, stale gold, small slices
    ("judge",),
    (
        "chain.artifacts",
        "chain.shards",
    ),  # the chain's typed values, and those between a sharded asset's steps
    ("store",),  # everything under the storage base
    ("compare",),
    ("gates",),
    ("reporting",),  # run reports, summaries, UI tables, export, history
    ("sweep",),  # configuration sweeps: the sweep: block, its grid's variants, the leaderboard
    ("chain.settings", "chain.run_overrides"),  # the run config: composes each layer's own settings models
    ("chain",),  # the chain as plain functions; letting go of its inputs; a run config's golden-set health
    ("orchestration",),
    ("definitions", "celery_worker"),  # the code location, and the Celery workers' app that runs it
    ("cli",),
)
#: Packages whose modules sit in different layers: a module named ``package.module`` above takes that
#: layer, the package's other modules the package's own.
SPLIT = ("chain",)
#: Bundled data, not code.
IGNORED = ("data",)
