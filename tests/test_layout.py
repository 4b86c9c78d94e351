"""The package reads top-down: golden → systems → matching/metrics → compare → report →
orchestration/CLI. Every import — at module level, inside a function or under TYPE_CHECKING — goes
down this list or stays in its own layer, and no modules import each other in a circle.

A new module belongs to a layer of :data:`kebab_eval_pipeline.layers.LAYERS`; a test fails on a new
climb or circle, naming the edge, so the grain is kept by CI rather than by review."""

from __future__ import annotations

import ast
from pathlib import Path

import kebab_eval_pipeline
from kebab_eval_pipeline.layers import IGNORED, LAYERS, SPLIT

PACKAGE = Path(kebab_eval_pipeline.__file__).parent
NAME = "kebab_eval_pipeline"


def _layer_of() -> dict[str, int]:
    return {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[1:2] and parts[1] in IGNORED:
            continue
        if parts[-1] == "__init__" and len(parts) > 1 and len(parts) > 2:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every package module ``module`` imports, wherever the import statement stands."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module and target.startswith(NAME + "."):
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def _top(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in SPLIT and ".".join(parts[1:3]) in _layer_of():
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer():
    layer = _layer_of()
    missing = sorted({_top(m) for m in _modules()} - set(layer))
    assert not missing, f"modules or subpackages with no layer in kebab_eval_pipeline/layers.py: {missing}"


def test_no_import_climbs_against_the_grain():
    layer = _layer_of()
    climbs = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        for b in targets
        if _top(a) in layer and _top(b) in layer and layer[_top(b)] > layer[_top(a)]
    )
    assert not climbs, "imports against the grain (a lower layer importing a higher one):\n" + "\n".join(
        climbs
    )


def test_no_import_circles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not circles, "modules importing each other in a circle:\n" + "\n".join(map(str, circles))


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The checker itself: an import inside a function counts, so a lazy import cannot hide a climb."""
    modules = {f"{NAME}.a": tmp_path / "a.py", f"{NAME}.b": tmp_path / "b.py", f"{NAME}.c": tmp_path / "c.py"}
    (tmp_path / "a.py").write_text(
        f"def f():\n    from {NAME} import b\n\nif False:\n    import {NAME}.c\n", encoding="utf-8"
    )
    assert _imports(f"{NAME}.a", tmp_path / "a.py", modules) == {f"{NAME}.b", f"{NAME}.c"}


#: Modules named by string that may be loaded against the grain: the metric catalogue's extension
#: point (the LLM judge registers its own measures; the catalogue loads it on its first query, so a
#: gate on ``judge_correctness`` is known without the caller importing the judge).
#: The package's lazy ``defs`` (``dagster -m kebab_eval_pipeline``) names the code location only when
#: Dagster asks for it, so importing the package imports nothing above it.
LATE_BOUND = {
    ("kebab_eval_pipeline.metrics.catalogue", "kebab_eval_pipeline.judge.metrics"),
    ("kebab_eval_pipeline.__init__", "kebab_eval_pipeline.definitions"),
}


def test_modules_named_by_string_follow_the_grain_too():
    """A module loaded by name (importlib, a preload list, a kind's ``adapter("module:Name")``) is an
    import all the same."""
    layer = _layer_of()
    modules = _modules()
    climbs = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # a module's name, or an object in it as "package.module:attribute" (a system kind's
            # late-bound adapter, systems/kind.py)
            text = node.value if isinstance(node, ast.Constant) else None
            named = text.partition(":")[0] if isinstance(text, str) else None
            if named in modules:
                target = named
                if (module, target) in LATE_BOUND or target == module:
                    continue
                if layer[_top(target)] > layer[_top(module)]:
                    climbs.append(f"{module} -> {target}")
    assert not climbs, "modules named against the grain:\n" + "\n".join(sorted(climbs))
