"""A sweep's grid: its variants' order and ids, the config check (every problem at once, naming
``sweep.grid.<key>``), and the settings a sweep run id resolves to."""

from __future__ import annotations

import hashlib
import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.run_overrides import variant_settings
from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import check_run_id
from kebab_eval_pipeline.sweep.grid import (
    MAX_VARIANTS,
    apply_variant,
    expand,
    find_variant,
    select,
    variant_versions,
)
from tests.conftest import write


def sha6(overrides: dict) -> str:
    """The id's hash, computed here from its definition: canonical JSON, SHA-256, 6 hex digits."""
    text = json.dumps(overrides, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def test_variants_in_grid_order_with_readable_ids():
    grid = {"system.chunk_size": [200, 800], "system.mode": ["lexical", "hybrid"], "k": [[1, 10]]}
    variants = expand("chunking", grid)
    assert [v.overrides for v in variants] == [
        {"system.chunk_size": 200, "system.mode": "lexical", "k": [1, 10]},
        {"system.chunk_size": 200, "system.mode": "hybrid", "k": [1, 10]},
        {"system.chunk_size": 800, "system.mode": "lexical", "k": [1, 10]},
        {"system.chunk_size": 800, "system.mode": "hybrid", "k": [1, 10]},
    ]
    assert [v.run_id for v in variants] == [
        f"sweep-chunking-chunk_size-{size}_mode-{mode}_k-1.10-{sha6(v.overrides)}"
        for (size, mode), v in zip(
            [(200, "lexical"), (200, "hybrid"), (800, "lexical"), (800, "hybrid")], variants, strict=True
        )
    ]
    assert [v.index for v in variants] == [0, 1, 2, 3]
    assert variants[1].label() == "chunk_size=200, mode=hybrid, k=1+10"
    # Pinned: an id never changes between versions (stored runs are found by it).
    (pinned,) = expand("chunking", {"system.chunk_size": [200]})
    assert pinned.run_id == "sweep-chunking-chunk_size-200-80bd14"
    assert variant_versions("chunking", variants[1]) == {
        "sweep": f"chunking/{variants[1].slug}",
        "sweep.system.chunk_size": "200",
        "sweep.system.mode": "hybrid",
        "sweep.k": "1+10",
    }


def test_long_and_unsafe_values_still_make_valid_distinct_ids():
    grid = {"golden": ["/data/golden sets/ünïcode..v1.yaml", "/data/golden sets/unicode v1.yaml", "x" * 300]}
    variants = expand("n" * 40, grid)
    for v in variants:
        assert check_run_id(v.run_id) == v.run_id and len(v.run_id) <= 128
        assert v.run_id.endswith(sha6(v.overrides))
    assert len({v.run_id for v in variants}) == 3
    assert variants[0].slug.startswith("golden-data.golden.sets.")


def test_select_by_slug_readable_part_or_run_id():
    variants = expand("s", {"system.mode": ["lexical", "hybrid", "vector"]})
    chosen, unknown = select(variants, ["mode-vector", variants[0].run_id, variants[1].slug, "mode-nope"])
    assert [v.index for v in chosen] == [0, 1, 2] and unknown == ["mode-nope"]


def test_apply_variant_sets_system_and_top_level_keys():
    doc = {"system": {"kind": "reference", "mode": "lexical"}, "k": [1]}
    out = apply_variant(doc, {"system.mode": "hybrid", "k": [5], "answers": False})
    assert out == {"system": {"kind": "reference", "mode": "hybrid"}, "k": [5], "answers": False}
    assert doc == {"system": {"kind": "reference", "mode": "lexical"}, "k": [1]}  # not changed


VALUES = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.none(),
    st.text(string.printable, max_size=40),
    st.lists(st.integers(1, 1000), max_size=4),
)
KEYS = st.sampled_from(
    ["k", "answers", "golden", "system.chunk_size", "system.mode", "system.refusal_threshold"]
)
GRIDS = st.dictionaries(
    KEYS, st.lists(VALUES, min_size=1, max_size=3, unique_by=json.dumps), min_size=1, max_size=3
)


@given(GRIDS, st.from_regex(r"[a-z0-9][a-z0-9._-]{0,39}", fullmatch=True).filter(lambda s: ".." not in s))
def test_ids_are_valid_unique_and_depend_only_on_the_variant(grid, name):
    variants = expand(name, grid)
    assert len({v.run_id for v in variants}) == len(variants)
    for v in variants:
        assert check_run_id(v.run_id).startswith(f"sweep-{name}-") and v.run_id.endswith(sha6(v.overrides))
        # The same overrides in a grid of other values, in another order: the same id.
        alone = expand(name, {k: [value] for k, value in reversed(v.overrides.items())})
        assert alone[0].run_id.rsplit("-", 1)[-1] == v.run_id.rsplit("-", 1)[-1]
        assert find_variant(name, grid, v.run_id) == v


def test_every_grid_problem_is_listed_at_once(tmp_path):
    cfg = write(
        tmp_path / "eval.yaml",
        "sweep:\n"
        "  name: chunking\n"
        "  grid:\n"
        "    system.chunk_size: [200, big, 800, 800]\n"  # line 4
        "    system.mdoe: [lexical]\n"
        "    gates: [{}]\n"
        "    k: [10]\n"
        "    answer: []\n"
        "    system.kind: [http]\n",
    )
    with pytest.raises(InputError) as caught:
        load_settings(cfg)
    found = {(o.field, o.position, o.reason) for o in caught.value.offenders}
    assert found == {
        ("sweep.grid.system.chunk_size", "line 4", "listed more than once: 800"),
        ("sweep.grid.answer", "line 8", "empty list: give at least one value to try"),
        (
            "sweep.grid.system.mdoe",
            "line 5",
            "not a setting of a reference system — did you mean 'system.mode'?",
        ),
        (
            "sweep.grid.gates",
            "line 6",
            "cannot be swept: the asset checks are built once from the config, for every run: "
            "set it outside the sweep",
        ),
        ("sweep.grid.answer", "line 8", "not a run setting — did you mean 'answers'?"),
        (
            "sweep.grid.system.kind",
            "line 9",
            "the system kind cannot be swept (each kind has its own settings): one sweep per kind",
        ),
        (
            "sweep.grid.system.chunk_size",
            "line 4",
            "big: Input should be a valid integer, unable to parse string as an integer",
        ),
        ("sweep.grid.k", "line 7", "10: Input should be a valid list"),
    }


def test_combinations_are_checked_once_each_value_is_fine():
    grid = {"system.chunk_size": [200, 800], "system.chunk_overlap": [0, 300]}
    doc = {"sweep": {"name": "s", "grid": grid}}
    with pytest.raises(InputError) as caught:
        settings_from_dict(doc)
    (offender,) = caught.value.offenders
    assert offender.field == "sweep.grid"
    assert offender.reason == (
        "variant chunk_size=200, chunk_overlap=300: system: chunk_overlap must be smaller than chunk_size"
    )


@pytest.mark.parametrize(
    ("sweep", "field", "reason"),
    [
        ({"name": "a b", "grid": {"k": [[1]]}}, "sweep.name", "String should match pattern"),
        ({"name": "a..b", "grid": {"k": [[1]]}}, "sweep.name", "'..' is not allowed"),
        ({"name": "s", "grid": {}}, "sweep.grid", "no settings to sweep"),
        ({"name": "s", "grid": {"k": [[1]]}, "metric": "nope"}, "sweep.metric", "unknown metric 'nope'"),
        ({"name": "s", "grid": {"k": 5}}, "sweep.grid.k", "expected a list of values to try, got int 5"),
        ({"grid": {"k": [[1]]}}, "sweep.name", "Field required"),
    ],
)
def test_bad_sweep_blocks(sweep, field, reason):
    with pytest.raises(InputError) as caught:
        settings_from_dict({"sweep": sweep})
    assert [(o.field, reason in o.reason) for o in caught.value.offenders] == [(field, True)]


def test_too_many_variants():
    grid = {"system.chunk_size": list(range(100, 115)), "k": [[k] for k in range(1, 15)]}  # 15 × 14
    with pytest.raises(InputError) as caught:
        settings_from_dict({"sweep": {"name": "s", "grid": grid}})
    (offender,) = caught.value.offenders
    assert offender.field == "sweep.grid"
    assert offender.reason == f"210 variants (15 × 14): at most {MAX_VARIANTS} (each is a whole run)"


def test_variant_settings_of_a_sweep_run_id(tmp_path):
    (tmp_path / "corpus-b").mkdir()
    cfg = write(
        tmp_path / "conf" / "eval.yaml",
        "answers: false\n"
        "system: {kind: reference, mode: lexical, chunk_size: 400}\n"
        "sweep:\n"
        "  name: corpora\n"
        "  grid:\n"
        "    system.corpus: [../corpus-b]\n"
        "    system.refusal_threshold: [0.2, 0.4]\n"
        "    answers: [true]\n",
    )
    settings = load_settings(cfg)
    first, second = expand("corpora", settings.sweep.grid)
    varied = variant_settings(settings, second.run_id)
    assert varied.system.corpus == str(tmp_path / "corpus-b")  # relative to the config file
    assert varied.system.refusal_threshold == 0.4 and varied.answers is True
    assert (varied.system.mode, varied.system.chunk_size) == ("lexical", 400)  # the rest as configured
    assert varied.sweep == settings.sweep  # kept: the run records which variant it is
    for other in (None, "alice-20250101-000000", "sweep-corpora-nope-000000", "sweep-other-" + first.slug):
        assert variant_settings(settings, other) is settings
    plain = settings_from_dict({"answers": False})
    assert variant_settings(plain, first.run_id) is plain  # no sweep: a sweep-like id is just an id
