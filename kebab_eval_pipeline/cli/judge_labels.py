"""``kebab-eval judge label`` and ``judge calibrate``: a person's labels of a stored judged run, and
the judge measured against them (agreement, corrected means).

Both read a stored run (its golden set and judgements); neither calls the system under test or the
judge. The arithmetic lives in :mod:`kebab_eval_pipeline.judge.calibration`, the sample design in
:mod:`kebab_eval_pipeline.judge.label_sample`, the file in :mod:`kebab_eval_pipeline.judge.labels`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli.address import ChainOption, GateOption
from kebab_eval_pipeline.cli.console import err, out
from kebab_eval_pipeline.foundation.errors import InputError, Offender

LabelsOption = Annotated[
    Path, typer.Option("--labels", help="The labels file (JSON Lines; created by `judge label`).")
]
ConfigOption = Annotated[Path | None, typer.Option("--config", help="Run config (its storage).")]
_CRITERIA = ("groundedness", "correctness", "relevance")
#: Unjudged hits pooled at rank ≤ this when neither --depth nor compare.provisional_depth says.
DEFAULT_DEPTH = 10


def _judged_run(run_id: str, config: Path | None, chain: str | None, gate: str | None):
    """(judgements, golden queries) of a stored judged run; InputError when it is absent or was not
    judged."""
    from kebab_eval_pipeline.cli.instance import open_store

    store = open_store(config, chain, gate)
    if not store.exists("judge", run_id):
        raise InputError(
            "no judged run to label",
            [Offender(run_id, f"no stored judgements for this run under {store.base}", field="run_id")],
        )
    tables, info = store.read("judge", run_id)
    judgements = tables["judgements"]
    if not info.get("enabled") or judgements.empty:
        raise InputError(
            "the run was not judged",
            [
                Offender(
                    run_id,
                    f"it has no judgements: judge it with `kebab-eval rejudge {run_id}` first",
                    field="run_id",
                )
            ],
        )
    queries = store.read("golden_set", run_id, columns={"queries": ["query_id", "category"]})[0]["queries"]
    return judgements, queries


def _relevance_order(run_id, against, depth, n, seed, config, chain, gate):
    """The pooled unjudged hits of ``run_id`` (and ``against``) to label for relevance, query by
    query (``compare.provisional_sample.people_sample``); InputError naming every run not stored."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.instance import open_store
    from kebab_eval_pipeline.compare.fallback import plan_matching
    from kebab_eval_pipeline.compare.provisional_sample import people_sample
    from kebab_eval_pipeline.judge.config import JudgeSettings

    store = open_store(config, chain, gate)
    ids = [run_id, *([against] if against else [])]
    missing = [
        Offender(r, f"no stored run under {store.base}", field="--against" if r == against else "run_id")
        for r in ids
        if not store.exists("retrieval_results", r) or not store.exists("query_scores", r)
    ]
    if missing:
        raise InputError("no stored run to label", missing)
    settings = load_settings(config)
    judge = settings.judge or JudgeSettings()
    pool_depth = depth or settings.compare.provisional_depth or DEFAULT_DEPTH
    # in the comparison's order (baseline --against, then RUN) and under its matching, so the pool
    # is the one `kebab-eval compare AGAINST RUN` has the judge label
    runs = [store.stored_run(r) for r in reversed(ids)]
    criterion = plan_matching(runs[0], runs[1]).criterion if against else None
    return people_sample(runs, pool_depth, criterion, judge.context_chars, seed, limit=n)


def label(
    run_id: Annotated[
        str,
        typer.Argument(help="A stored run: judged (its answers to label), or for relevance the candidate."),
    ],
    labels_path: LabelsOption,
    labeller: Annotated[
        str, typer.Option("--labeller", help="Who is labelling (recorded with every label).")
    ],
    criterion: Annotated[
        str, typer.Option("--criterion", help="groundedness (default), correctness or relevance.")
    ] = "groundedness",
    n: Annotated[
        int, typer.Option("--n", min=1, help="Items in the sample (default 50); for relevance, queries.")
    ] = 50,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample design (default 0).")] = 0,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help="relevance: the other run of the comparison whose unjudged hits are pooled with RUN's.",
        ),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth",
            min=1,
            help="relevance: pool unjudged hits at rank ≤ this (default: compare.provisional_depth or 10).",
        ),
    ] = None,
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Label a judged run's answers by hand, one at a time: the question, the answer, its
    citations and the context passages the judge saw, and the 0–5 scale in the judge prompt's words
    — never the judge's own score. Type a score 0–5, s to skip, q to stop, ? for the scale; each
    score is appended to --labels at once, with --labeller and the time.

    The sample is the first --n items of a seeded labelling order stratified by the query's slice
    (category) and the judge's verdict (pass or fail), so any prefix of it keeps every stratum in
    its share. Items this labeller already labelled (the same answer and context) are not shown
    again: a session can be resumed. Exit 2 for a run that was not judged or a bad labels file.

    --criterion relevance labels the hits a comparison's judge labels provisionally: RUN's (and
    those of --against, the comparison's baseline) hits at rank ≤ --depth that the golden set never
    judged, each shown as the judge reads it (question, passage). The sample is --n queries, drawn
    by slice and by whether RUN found a relevant hit, each with every one of its pooled hits: the
    comparison corrects its provisional metrics with the queries labelled whole. RUN need not be
    judged."""
    from kebab_eval_pipeline.cli.console import line_asker
    from kebab_eval_pipeline.cli.label_session import LabelItem, run_session
    from kebab_eval_pipeline.judge.calibration import answer_items
    from kebab_eval_pipeline.judge.label_sample import labelling_order
    from kebab_eval_pipeline.judge.labels import append_label, read_labels
    from kebab_eval_pipeline.judge.metrics import PASS_SCORE

    if criterion not in _CRITERIA:
        raise InputError(
            "unknown criterion", [Offender("--criterion", f"{criterion!r}: use {', '.join(_CRITERIA)}")]
        )
    offenders = []
    if not labeller.strip():
        offenders.append(Offender("--labeller", "name the person labelling"))
    if criterion != "relevance":
        offenders += [
            Offender(option, f"only with --criterion relevance (not {criterion})")
            for option, value in (("--against", against), ("--depth", depth))
            if value is not None
        ]
    if offenders:
        raise InputError("bad labelling options", offenders)
    existing = read_labels(labels_path)  # a bad file is reported before anything is shown
    if criterion == "relevance":
        order = _relevance_order(run_id, against, depth, n, seed, config, chain, gate)
        sampled = int(order["query_id"].nunique())
    else:
        judgements, queries = _judged_run(run_id, config, chain, gate)
        items = answer_items(judgements)
        items = items[items["criterion"] == criterion]
        category = dict(zip(queries["query_id"].astype(str), queries["category"].astype(str), strict=True))
        items = items.assign(slice=items["query_id"].map(category).fillna(""))
        order = labelling_order(items, PASS_SCORE, seed, limit=n)
    done = set(
        existing.loc[
            (existing["criterion"] == criterion) & (existing["labeller"] == labeller.strip()), "item_hash"
        ].astype(str)
    )
    todo = [
        LabelItem(str(r.query_id), str(r.item_hash), str(r.judge_input), str(r.stratum))
        for r in order.itertuples(index=False)
        if r.item_hash not in done
    ]
    already = f"seed {seed}; {len(order) - len(todo)} already labelled by {labeller.strip()}"
    if criterion == "relevance":
        what = f"{len(todo)} of the {len(order)} pooled hit(s) of a sample of {sampled} quer(ies) ({already})"
    else:
        what = f"{len(todo)} of a sample of {len(order)} item(s) ({already})"
    out.print(
        f"labelling {criterion} of run {run_id}"
        + (f" and {against}" if against else "")
        + f" into {labels_path}: {what}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if not todo:
        return
    labelled, skipped = run_session(
        todo,
        criterion,
        labeller.strip(),
        run_id,
        line_asker(),
        out,
        lambda one: append_label(labels_path, one),
    )
    out.print(
        f"labelled {labelled}, skipped {skipped}, left {len(todo) - labelled - skipped}: "
        f"written to {labels_path}",
        markup=False,
        highlight=False,
    )


def calibrate(
    run_id: Annotated[str, typer.Argument(help="A stored, judged run.")],
    labels_path: LabelsOption,
    fmt: Annotated[str, typer.Option("--format", help="text (default) | json.")] = "text",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap intervals (default 0).")] = 0,
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Measure a judged run's judge against a person's labels, per criterion: Cohen's κ on the 0–5
    scale (quadratic weights) and on the verdict (pass at 3), each with a 95% bootstrap interval,
    the confusion matrix, the labels' base rate and the verdict κ per slice; the judged mean with
    its naive interval; and the corrected mean — the prediction-powered (PPI++) estimate of what
    the labellers would have scored every item — with its 95% interval. Labels attach to the exact
    item the person saw: an answer changed since is unlabelled. Exit 2 for a run that was not
    judged or a bad labels file."""
    from kebab_eval_pipeline.judge.calibration import calibrate_run
    from kebab_eval_pipeline.judge.labels import read_labels
    from kebab_eval_pipeline.judge.metrics import PASS_SCORE
    from kebab_eval_pipeline.reporting.calibration import calibration_lines

    if fmt not in ("text", "json"):
        raise InputError("unsupported output format", [Offender("--format", f"{fmt!r}: use text or json")])
    labels = read_labels(labels_path)
    if labels.empty:
        err.print(f"warning: {labels_path} holds no label: nothing to calibrate against", markup=False)
    judgements, queries = _judged_run(run_id, config, chain, gate)
    report = calibrate_run(judgements, labels, queries, PASS_SCORE, seed=seed)
    if fmt == "json":
        doc = {"run_id": run_id, "labels": str(labels_path), "criteria": [c.as_dict() for c in report]}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return
    for line in calibration_lines(report):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
