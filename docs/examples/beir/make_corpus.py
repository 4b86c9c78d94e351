"""Write corpus.jsonl beside this file: one BEIR document per section of the seven kebab component
READMEs bundled in ../kebab-docs/corpus/docs/components/ (the text before the first `##` heading
is the README's own document).

    python docs/examples/beir/make_corpus.py

`_id` is `<component>/<n>` (n: the section's number in its file, 0 = the introduction), `title`
is `<Component>: <heading>`, `text` the section's lines. queries.jsonl and qrels/test.tsv are
written by hand against these ids."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
COMPONENTS = HERE.parent / "kebab-docs" / "corpus" / "docs" / "components"


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, body lines) per `## ` section; the part before the first is under the `# ` title."""
    out: list[tuple[str, list[str]]] = []
    heading, body, fence = "", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("# ") and not out and not body:
            heading = line[2:].strip()
            continue
        if not fence and line.startswith("## "):
            out.append((heading, body))
            heading, body = line[3:].strip(), []
            continue
        body.append(line)
    out.append((heading, body))
    return out


def main() -> None:
    rows = []
    for readme in sorted(COMPONENTS.glob("*/README.md")):
        component = readme.parent.name
        title = readme.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        for n, (heading, body) in enumerate(sections(readme.read_text(encoding="utf-8"))):
            text = "\n".join(body).strip()
            if text:
                name = title if n == 0 else f"{title}: {heading}"
                rows.append({"_id": f"{component}/{n}", "title": name, "text": text})
    with (HERE / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    print(f"wrote {len(rows)} documents")


if __name__ == "__main__":
    main()
