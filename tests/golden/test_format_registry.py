"""A golden format is one reader module (golden/formats.py): the loader's readers and sniffing
order, the run config's ``golden.format``, ``--format`` and the golden-sets guide's format table all come
from (or are checked against) the readers' own ``FORMAT`` / ``SNIFF_RANK`` declarations."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import typing

import pytest

from kebab_eval_pipeline.golden import formats, readers
from kebab_eval_pipeline.golden.formats import FORMATS, LINE_READERS, READERS
from kebab_eval_pipeline.golden.source import GoldenFormat
from tests import docs_pages


def test_the_formats_are_the_readers_declarations_in_sniffing_order():
    assert FORMATS == ("auto", "ckv", "kebab", "wfgy", "supports", "canonical", "beir", "trec", "ranx")
    assert LINE_READERS == ("wfgy", "supports", "canonical")  # canonical, fitting the most, last
    assert all(name == module.FORMAT for name, module in READERS.items())
    assert typing.get_args(GoldenFormat) == FORMATS


def test_a_reader_declaring_a_format_without_its_parts_is_refused(tmp_path, monkeypatch):
    (tmp_path / "half.py").write_text(
        'FORMAT = "half"\nSNIFF_RANK = 9\n\ndef looks_like(doc):\n    return False\n'
    )
    monkeypatch.setattr(readers, "__path__", [*readers.__path__, str(tmp_path)])
    try:
        with pytest.raises(
            TypeError, match=r"golden reader \S*half declares FORMAT but not entries, to_canonical"
        ):
            formats._readers()
    finally:
        sys.modules.pop(f"{readers.__name__}.half", None)


def test_a_new_format_is_one_reader_module(tmp_path):
    """A reader module added to golden/readers/ is sniffed, loaded and accepted as ``golden.format``
    with nothing else edited."""
    (tmp_path / "faq.py").write_text(
        textwrap.dedent(
            '''
            """A toy format: {faq: [{q, page}]}."""
            FORMAT = "faq"
            SNIFF_RANK = 0.5  # after ckv, before kebab

            def looks_like(doc):
                return isinstance(doc, dict) and "faq" in doc

            def entries(doc):
                return [(["faq", i], q) for i, q in enumerate(doc["faq"])], sorted(set(doc) - {"faq"})

            def to_canonical(entry):
                return {"id": entry["id"], "query": entry["q"], "supports": [{"doc_id": entry["page"]}]}, []
            '''
        ),
        encoding="utf-8",
    )
    golden = tmp_path / "faq.yaml"
    golden.write_text("faq:\n  - {id: f1, q: How do I start?, page: start.md}\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import kebab_eval_pipeline.golden.readers as readers
        readers.__path__.append({str(tmp_path)!r})
        from kebab_eval_pipeline.golden.formats import FORMATS
        from kebab_eval_pipeline.golden.load import load_golden
        from kebab_eval_pipeline.chain.settings import settings_from_dict

        print("formats:", ", ".join(FORMATS))
        loaded = load_golden({str(golden)!r})
        print("sniffed:", loaded.format, loaded.golden.queries[0].query)
        source = settings_from_dict({{"golden": {{"path": {str(golden)!r}, "format": "faq"}}}}).golden
        print("configured:", source.format)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "formats: auto, ckv, faq, kebab, wfgy, supports, canonical, beir, trec, ranx" in proc.stdout
    assert "sniffed: faq How do I start?" in proc.stdout
    assert "configured: faq" in proc.stdout


def test_the_cli_format_option_lists_every_format():
    from kebab_eval_pipeline.cli.golden import FormatOption

    help_text = FormatOption.__metadata__[0].help
    listed = tuple(f.strip() for f in help_text.split("(")[0].split("|"))
    assert sorted(listed) == sorted(FORMATS), help_text


def test_the_guides_format_table_lists_every_format():
    section = docs_pages.page("guides/golden-sets.md").split("\n## ", 1)[0]
    table = section.split("| format (`--format`) |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert sorted(listed) == sorted(set(FORMATS) - {"auto"}), listed
