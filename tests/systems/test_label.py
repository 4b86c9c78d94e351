"""The label of a run's system in titles: what a person recognises, never "None" (issue 23)."""

from __future__ import annotations

import sys
from pathlib import PurePath

from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.systems.label import system_label


def test_each_kind_is_named_by_what_identifies_it():
    cases = {
        "reference, mode lexical": {"kind": "reference", "mode": "lexical", "details": {}},
        "command: ./mysys.py": {
            "kind": "command",
            "mode": None,
            "details": {"search_argv": "./mysys.py {query}"},
        },
        "command: mysys, mode hybrid": {
            "kind": "command",
            "mode": "hybrid",
            "details": {"search_argv": "/opt/tools/mysys --q '{query}'"},
        },
        "command: python3 tools/search.py": {
            "kind": "command",
            "details": {"search_argv": "/usr/bin/python3 tools/search.py {query}"},
        },
        f"command: {PurePath(sys.executable).name}": {
            "kind": "command",
            "details": {"search_argv": f"{sys.executable} -c 'print(1)'"},
        },
        "command: ./serve.sh": {
            "kind": "command",
            "details": {"protocol": "jsonl", "argv": "./serve.sh --jsonl"},
        },
        "http: http://127.0.0.1:8080/search?key=***": {
            "kind": "http",
            "mode": None,
            "details": {"search_url": "http://127.0.0.1:8080/search?key=***"},
        },
        "replay: run.jsonl": {"kind": "replay", "details": {"trace": "/ci/out/run.jsonl"}},
        "python: my_rag.eval:build": {"kind": "python", "details": {"callable": "my_rag.eval:build"}},
        "command": {"kind": "command"},  # an older run stored no details
        # A run's stored info["system"]: the details beside kind and mode.
        "command: ./run.sh, mode vector": {
            "kind": "command",
            "mode": "vector",
            "search_argv": "./run.sh {query}",
        },
    }
    for expected, system in cases.items():
        assert system_label(system) == expected


#: Details text without the letters of "None" or "mode": whatever they hold, those words come from the label.
DETAIL_TEXT = st.text(alphabet=st.sampled_from("abc/ .:{}-'\"\\=?&"), max_size=20)


@given(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["reference", "command", "http", "replay", "python"]), "mode": st.none()},
        optional={
            "details": st.dictionaries(
                st.sampled_from(["search_argv", "argv", "search_url", "trace"]), DETAIL_TEXT
            )
        },
    )
)
def test_no_mode_never_shows_none(system):
    label = system_label(system)
    assert "None" not in label and "mode" not in label
    assert label.startswith(system["kind"])
