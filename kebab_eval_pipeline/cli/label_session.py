"""The interactive loop of ``kebab-eval judge label``: show one judged item, read a person's score.

The items come in the sample design's order (:mod:`kebab_eval_pipeline.judge.label_sample`); the
person sees what the judge saw — question, answer, citations, context passages — and the scale in
the prompt's words, never the judge's score (a label anchored on the judge's verdict would make
the agreement meaningless). Each answer is appended to the labels file at once; ``s`` skips an
item, ``q``, an empty line at the end of input, end of input or Ctrl-C ends the session with a
summary. Everything typed goes through :func:`parse_score`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.console import Console

from kebab_eval_pipeline.judge.labels import LABEL_MAX, LABEL_MIN, Label
from kebab_eval_pipeline.judge.prompts import JudgeInput, scale

Ask = Callable[[str], str]
PROMPT = f"score {LABEL_MIN}-{LABEL_MAX} (s skip, q quit, ? scale): "


@dataclass(frozen=True)
class LabelItem:
    """One item to label: its query, what the judge saw (``judge_input`` JSON), its hash and the
    stratum it was drawn from."""

    query_id: str
    item_hash: str
    judge_input: str
    stratum: str


def parse_score(text: str) -> int | str:
    """What was typed at the prompt: a score 0–5 (int), or ``"skip"``, ``"quit"``, ``"scale"``;
    a message (str starting with ``"!"``) for anything else."""
    word = text.strip().lower()
    if word in ("s", "skip"):
        return "skip"
    if word in ("q", "quit", "exit"):
        return "quit"
    if word in ("?", "h", "help"):
        return "scale"
    if word.isdigit() and LABEL_MIN <= int(word) <= LABEL_MAX:
        return int(word)
    return f"! {text.strip()!r} is not a score: type a whole number {LABEL_MIN}-{LABEL_MAX}, s, q or ?"


def label_scale(criterion: str) -> str:
    """The 0–5 scale a person labels ``criterion`` on, in its judge prompt's words."""
    if criterion == "relevance":
        from kebab_eval_pipeline.judge.relevance import RELEVANCE_SCALE

        return RELEVANCE_SCALE
    return scale(criterion)  # type: ignore[arg-type]


def show_item(console: Console, criterion: str, item: LabelItem, number: int, total: int) -> None:
    """Print one item as the judge saw it (plain text, never markup)."""
    head = f"── {number}/{total} · {criterion} · query {item.query_id} · {item.stratum.split(' / ')[0]}"
    if criterion == "relevance":
        from kebab_eval_pipeline.judge.relevance import RelevanceInput

        hit = RelevanceInput.from_json(item.judge_input)
        where = hit.doc_path + (f" — {hit.heading}" if hit.heading else "")
        lines = ["", head, f"QUESTION: {hit.question}", f"PASSAGE ({where or 'no document named'}):"]
        lines += [f"    {t}" for t in (hit.text or "(empty)").splitlines()]
        for line in lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    seen = JudgeInput.from_json(item.judge_input)
    lines = [
        "",
        head,
        f"QUESTION: {seen.question}",
        f"ANSWER: {seen.answer or '(empty)'}",
        f"CITED: {', '.join(seen.citations) or '(none)'}",
        "CONTEXT:" if seen.context else "CONTEXT: (no passages were retrieved)",
    ]
    for passage in seen.context:
        where = passage.get("doc_path", "") + (f" — {passage['heading']}" if passage.get("heading") else "")
        lines += [
            f"  [{passage.get('ref', '')}] {where}",
            *(f"    {t}" for t in passage.get("text", "").splitlines()),
        ]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def run_session(
    items: Sequence[LabelItem],
    criterion: str,
    labeller: str,
    run_id: str,
    ask: Ask,
    console: Console,
    write: Callable[[Label], None],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> tuple[int, int]:
    """Present ``items`` one at a time and ``write`` a :class:`Label` per score given. Returns
    (labelled, skipped). Ends early on ``q``, end of input or Ctrl-C (what was written stays)."""
    labelled = skipped = 0
    console.print(f"scale — {label_scale(criterion)}", markup=False, highlight=False, soft_wrap=True)
    with contextlib.suppress(EOFError, KeyboardInterrupt):
        for number, item in enumerate(items, start=1):
            show_item(console, criterion, item, number, len(items))
            while True:
                answer = parse_score(ask(PROMPT))
                if answer == "scale":
                    console.print(label_scale(criterion), markup=False, highlight=False, soft_wrap=True)
                    continue
                if isinstance(answer, str) and answer.startswith("!"):
                    console.print(answer[2:], markup=False, highlight=False, soft_wrap=True)
                    continue
                break
            if answer == "quit":
                break
            if answer == "skip":
                skipped += 1
                continue
            write(
                Label(
                    criterion=criterion,  # type: ignore[arg-type]
                    query_id=item.query_id,
                    item_hash=item.item_hash,
                    label=int(answer),
                    labeller=labeller,
                    labelled_at=now(),
                    run_id=run_id,
                )
            )
            labelled += 1
    return labelled, skipped
