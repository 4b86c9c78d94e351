"""A system kind is one module declaring everything about it (systems/kind.py, systems/kinds/):
a declaration missing a part is refused on import, the config's ``system:`` block, ``--system``,
``build_system``, identities and labels read the registry, a new kind works end to end from its
one module, and the documentation's list of kinds is the registry's."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems import kinds
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import SystemKind, adapter, register
from kebab_eval_pipeline.systems.settings import KINDS, SYSTEM_KINDS, SystemSettings
from tests import docs_pages
from tests.test_cli import cli_env

REPO = Path(__file__).resolve().parents[2]


class _Toy(StrictSettings):
    kind: Literal["toy"]


PARTS = {
    "build": lambda s: None,
    "identity": lambda s: "t",
    "label": lambda d: "t",
    "capabilities": lambda s: Capabilities(),
}


@pytest.mark.parametrize("missing", sorted(PARTS))
def test_a_kind_missing_a_part_is_refused_when_declared(missing):
    given = {k: v for k, v in PARTS.items() if k != missing}
    with pytest.raises(TypeError, match=f"missing 1 required .*'{missing}'"):
        SystemKind(name="toy", settings=_Toy, **given)
    with pytest.raises(TypeError, match=f"system kind 'toy': {missing} must be callable, got None"):
        SystemKind(name="toy", settings=_Toy, **{**given, missing: None})


def test_a_kind_whose_settings_model_names_another_kind_is_refused():
    with pytest.raises(TypeError, match=r"_Toy must have the field kind: Literal\['other'\]"):
        SystemKind(name="other", settings=_Toy, **PARTS)
    with pytest.raises(TypeError, match="settings must be a StrictSettings model"):
        SystemKind(name="toy", settings=dict, **PARTS)
    with pytest.raises(ValueError, match="lower-case letters"):
        SystemKind(name="Toy Kind", settings=_Toy, **PARTS)


def test_two_modules_cannot_claim_one_kind():
    with pytest.raises(ValueError, match="system kind 'http' is registered twice"):
        register(SystemKind(name="http", settings=KINDS["http"].settings, **PARTS))
    assert KINDS["http"].build.__module__ == "kebab_eval_pipeline.systems.kinds.http"


def test_every_module_of_the_kinds_package_is_one_registered_kind():
    modules = [m.name for m in pkgutil.iter_modules(kinds.__path__)]
    assert sorted(modules) == sorted(SYSTEM_KINDS)
    for name in modules:
        module = importlib.import_module(f"kebab_eval_pipeline.systems.kinds.{name}")
        assert module.KIND is KINDS[name] and module.KIND.settings.__module__ == module.__name__
    assert SYSTEM_KINDS == ("reference", "command", "http", "replay", "python")


def test_every_late_bound_adapter_resolves_to_a_callable():
    found = []
    for name in SYSTEM_KINDS:
        path = Path(importlib.import_module(f"kebab_eval_pipeline.systems.kinds.{name}").__file__)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "adapter":
                found.append(node.args[0].value)
    # one per kind, plus command jsonl and the live version readers of python and replay systems
    assert len(found) == 8, found
    for reference in found:
        assert callable(adapter(reference)), reference
    with pytest.raises(ValueError, match=re.escape("expected 'kebab_eval_pipeline.<module>:<name>'")):
        adapter("os:system")


MESSAGE = "system.kind must be one of reference, command, http, replay, python"


def test_the_config_union_and_its_message_come_from_the_registry():
    from pydantic import TypeAdapter

    union = TypeAdapter(SystemSettings)
    for name, kind in KINDS.items():
        assert type(union.validate_python(_minimal(name))) is kind.settings
    with pytest.raises(ValidationError, match=re.escape(MESSAGE)):
        union.validate_python({"kind": "quantum"})


def _minimal(kind: str) -> dict:
    return {
        "reference": {},
        "command": {"kind": "command", "search_argv": ["x"]},
        "http": {"kind": "http", "search_url": "http://127.0.0.1:1/s"},
        "replay": {"kind": "replay", "path": "t.jsonl"},
        "python": {"kind": "python", "callable": "m:f"},
    }[kind]


# -- the documentation's list of kinds is the registry's ---------------------------------------------


def _readme() -> str:
    return docs_pages.all_text()


def test_the_documentation_lists_exactly_the_registered_kinds():
    line = re.search(r"^  kind: reference +# (.+?) \(see \"Connecting your system\"\)$", _readme(), re.M)
    assert line, "the config guide's `kind:` line is gone from the documentation"
    listed = tuple(k.strip() for k in line.group(1).split("|"))
    assert listed == SYSTEM_KINDS, f"the documentation lists {listed}, the registry {SYSTEM_KINDS}"
    # each kind has a config of its own among the recipes (or in "The reference system")
    shown = set(re.findall(r"^\s*kind: ([a-z_]+)", _readme(), re.M))
    assert set(SYSTEM_KINDS) <= shown, (
        f"kinds without a `kind:` example in the documentation: {set(SYSTEM_KINDS) - shown}"
    )
    words = {3: "Three", 4: "Four", 5: "Five", 6: "Six", 7: "Seven", 8: "Eight"}
    assert f"{words[len(SYSTEM_KINDS)]} adapters share one contract" in _readme()


def test_the_cli_system_option_lists_exactly_the_registered_kinds():
    import typing

    from kebab_eval_pipeline.cli.run import run

    help_text = typing.get_type_hints(run, include_extras=True)["system"].__metadata__[0].help
    listed = tuple(k.strip() for k in help_text.split("(")[0].split("|"))
    assert listed == SYSTEM_KINDS, help_text


# -- a new kind is one module -----------------------------------------------------------------

#: A kind declared the way a module of systems/kinds/ declares one: the built-in reference system
#: under another kind whose only setting is the corpus folder (relative to the config file).
NEW_KIND = """
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.systems.kind import SystemKind, register


class MirrorSettings(StrictSettings):
    kind: Literal["mirror"]
    folder: str
    mode: str | None = None


def build(settings):
    from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings, build

    return build(ReferenceSystemSettings(corpus=settings.folder))


register(
    SystemKind(
        name="mirror",
        settings=MirrorSettings,
        build=build,
        identity=lambda s: f"folder {Path(s.folder).name}",
        label=lambda details: "the mirrored demo",
        capabilities=lambda s: Capabilities({"token_counts": "mirrors count no tokens"}),
        resolve_paths=lambda s, fix: s.model_copy(update={"folder": fix(s.folder, "system", "folder")}),
    )
)
"""


def test_a_new_kind_declared_in_one_module_runs_end_to_end(tmp_path):
    """Registered before the package's kinds load, a kind is a config's ``system.kind``, built,
    identified and labelled as it declares, and runs through ``kebab-eval run``."""
    from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS

    shutil.copytree(DEMO_CORPUS, tmp_path / "corpus")
    (tmp_path / "eval.yaml").write_text(
        "system:\n  kind: mirror\n  folder: corpus\n  mode: lexical\nstorage: store\n", encoding="utf-8"
    )
    script = tmp_path / "with_mirror.py"
    script.write_text(
        "from kebab_eval_pipeline.systems.capabilities import Capabilities\n"
        + NEW_KIND
        + textwrap.dedent(
            """
            import sys
            from kebab_eval_pipeline.chain.settings import load_settings
            from kebab_eval_pipeline.systems.identity import identity_from_settings
            from kebab_eval_pipeline.systems.settings import SYSTEM_KINDS

            settings = load_settings(sys.argv[1])
            print("kinds:", ", ".join(SYSTEM_KINDS))
            print("folder:", settings.system.folder)
            print("identity:", identity_from_settings(settings.system)["label"])
            print("lacks:", settings.run_lacks())
            from kebab_eval_pipeline.systems.label import system_label

            print("label:", system_label({"kind": "mirror", "mode": "lexical"}))
            from kebab_eval_pipeline.cli.main import app

            app(["run", "--config", sys.argv[1], "--run-id", "mirror-1", "--no-github-summary"])
            """
        ),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "eval.yaml")],
        env=cli_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "kinds: mirror, reference, command, http, replay, python" in out
    assert f"folder: {tmp_path / 'corpus'}" in out  # resolved against the config file's folder
    assert "identity: mirror folder corpus (lexical)" in out
    assert "'token_counts': 'mirrors count no tokens'" in out
    assert "label: mirror: the mirrored demo, mode lexical" in out
    assert "mrr" in out and "hit@5" in out  # evaluated by the system its build made
    assert "no earlier run of mirror folder corpus (lexical)" in out  # baselines: its identity
