"""kebab-eval-pipeline: evaluate RAG and search systems against golden query sets, as Dagster partitions.

The Dagster code location is :data:`kebab_eval_pipeline.definitions.defs`, and the package itself
names it too, so ``dagster dev -m kebab_eval_pipeline`` and ``dagster asset materialize -m
kebab_eval_pipeline …`` load the same definitions as ``-m kebab_eval_pipeline.definitions``
(``workspace.yaml``, ``[tool.dagster]``, ``[tool.dg]``). ``defs`` is a lazy attribute (PEP 562):
importing this package does not import Dagster, so the command-line tools — above all
``kebab-eval ref search``, run once per query by the command adapter — start without it.
Dagster finds ``defs`` because its module loader lists the package's members with ``dir()``,
which :func:`__dir__` answers.
"""

#: Attributes resolved on first use, from the module that defines them.
_LAZY = {"defs": "kebab_eval_pipeline.definitions"}


def __getattr__(name: str) -> object:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
