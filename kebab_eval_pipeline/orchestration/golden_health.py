"""``golden_health``: the golden set's health as an asset, with one asset check per kind of finding.

Not partitioned by run: it describes the golden set, not a run. Each materialization checks the
golden file as it is now (against the system's index and corpus, and the latest stored comparison
on the same golden content), so its materializations over time are the golden set's health trend:
the numeric ``health/…`` metadata plot across them, and ``golden_sha256`` / ``golden_name`` (in
metadata and tags) say which version each point describes. The findings are stored as Parquet
under ``{storage}/golden_health/{sha256[:16]}/`` (the UI table shows the first rows).

Selected with a run partition (``--select '*' --partition ID``, as CI materializes a run), it
does nothing: it is materialized on its own (the UI, ``dagster asset materialize --select
golden_health``, a schedule).

Checks (computed in the asset's step, from the same report): ``unsupported_answerable`` blocks
(fails the run) unless ``golden_health.unsupported_answerable: warn``; the others warn when their
count exceeds ``golden_health.max_findings``. A check that could not run (no catalogue and no
``source_root`` for stale supports, no corpus for leakage, no stored comparison) yields no result:
Dagster shows it skipped, never passed; the reason is logged and in ``skipped_checks`` metadata.
Pure logic: :mod:`kebab_eval_pipeline.golden_health`.
"""

# No `from __future__ import annotations`: Dagster reads the context annotation at definition time.

import re

import dagster as dg

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden_health.findings import CHECK_KINDS, HealthReport
from kebab_eval_pipeline.golden_health.render import CHECK_TITLES, markdown_table, outcome, summary_lines
from kebab_eval_pipeline.orchestration.assets import STAGE, _table_metadata, input_failure
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.run_config import refuse_ignored_run_config

ASSET = "golden_health"
PARTITION_TAG = "dagster/partition"
#: Materialization tags naming the golden version a point of the trend describes: the content
#: sha256's first 16 hex digits and the set's name (Dagster tag values: at most 63 characters of
#: letters, digits, ``_ . -``; the full sha256 is the ``golden_sha256`` metadata).
GOLDEN_SHA_TAG = "kebab/golden_sha256"
GOLDEN_NAME_TAG = "kebab/golden_name"
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _tag_value(text: str) -> str:
    return _TAG_UNSAFE.sub("_", text)[:63] or "unnamed"


def _blocking(settings: RunSettings, check: str) -> bool:
    return check == "unsupported_answerable" and settings.golden_health.unsupported_answerable == "fail"


def _check_description(settings: RunSettings, check: str) -> str:
    options = settings.golden_health
    if _blocking(settings, check):
        rule = "blocking: any one fails the run (golden_health.unsupported_answerable: fail)"
    elif check == "unsupported_answerable":
        rule = "a warning (golden_health.unsupported_answerable: warn)"
    else:
        rule = f"warns above {getattr(options.max_findings, check)} (golden_health.max_findings.{check})"
    detail = {
        "near_duplicates": f"; exact after normalisation, character {options.shingle_chars}-gram Jaccard "
        f"≥ {options.near_duplicate_jaccard:g}, embedding cosine ≥ {options.semantic_cosine:g} "
        f"({options.semantic_duplicates})",
        "leakage": f"; ≥ {options.leakage_share:g} of a question's word {options.leakage_ngram}-grams "
        "in one document",
        "small_slices": "; fewer queries than golden_health.min_slice_queries "
        "(default compare.slice_min_queries)",
    }.get(check, "")
    return f"The golden set's {CHECK_TITLES[check]}{detail} — {rule}."


def _check_result(
    key: dg.AssetKey, report: HealthReport, check: str, limit: int, blocking: bool
) -> dg.AssetCheckResult | None:
    """The check's result; None when it could not run (its note says why): no result is yielded,
    and Dagster shows the check skipped, never passed."""
    count = report.summary[check]
    passed = report.passed(check)
    state = outcome(report, check)
    if passed is None:
        return None
    tolerated = 0 if check == "unsupported_answerable" else getattr(report.settings.max_findings, check)
    reason = f"{CHECK_TITLES[check]}: {count} (tolerated: {tolerated})"
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=check,
        passed=bool(passed),
        severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
        description=reason if passed or blocking else f"warning (non-blocking): {reason}",
        metadata={
            "outcome": state,
            "count": dg.MetadataValue.int(int(count)),
            "tolerated": dg.MetadataValue.int(int(tolerated)),
            "blocking": blocking,
            "offenders": dg.MetadataValue.md(markdown_table(report, check, limit)),
        },
    )


def build_golden_health(settings: RunSettings, names: ChainNames = DEFAULT_NAMES) -> dg.AssetsDefinition:
    """The ``golden_health`` asset of one chain (key ``names.key("golden_health")``), depending on the
    chain's observed ``golden_file``, owned by the config's ``owners``, with one check per kind of
    finding (:data:`CHECK_KINDS`). ``settings`` fixes the checks' blocking and descriptions; the
    step reads the current settings from the chain's ``eval_settings`` resource."""
    key = names.key(ASSET)
    settings_key = names.resource("eval_settings")
    system_key = names.resource("system_under_test")
    storage_key = names.resource("artifact_storage")
    specs = [
        dg.AssetCheckSpec(
            check,
            asset=key,
            blocking=_blocking(settings, check),
            description=_check_description(settings, check),
        )
        for check in CHECK_KINDS
    ]

    spec = dg.AssetSpec(
        key,
        group_name=names.group,
        deps=[names.key("golden_file")],
        owners=list(settings.owners),
        kinds={"python", "parquet"},
        tags={STAGE: "golden"},
        # Skipped in a run of one evaluation partition: "materialize every asset of a partition"
        # (`--select '*' --partition ID`, the CI command) selects this unpartitioned asset too.
        skippable=True,
        description="The golden set's health, as a maintained data product: answerable queries with no "
        "relevant support (blocking), supports the index no longer holds, duplicate questions (exact, "
        "near, semantic), questions quoting the corpus verbatim, breakdown slices too small to conclude "
        "on, and the latest comparison's suspect-gold queue. One materialization per check of the "
        "golden file: the health/… metadata plot the trend across golden versions (golden_sha256).",
    )

    # A multi-asset that can subset: its check results are optional outputs, so a skipped step
    # (above) is not a missing output, and a selection of some checks gets only those.
    @dg.multi_asset(
        name=names.name(ASSET),
        specs=[spec],
        check_specs=specs,
        can_subset=True,
        required_resource_keys={settings_key, system_key, storage_key},
    )
    def golden_health(context: dg.AssetExecutionContext):
        refuse_ignored_run_config(context)
        if context.run.tags.get(PARTITION_TAG) is not None:
            context.log.info(
                "golden_health describes the golden set, not one run: not materialized in a run of "
                f"partition {context.run.tags[PARTITION_TAG]!r} (materialize it on its own)"
            )
            return
        # imported by a step that checks: not by every process that loads the definitions
        from kebab_eval_pipeline.chain.golden_health_run import check_golden_health

        store = getattr(context.resources, storage_key).store()
        try:
            current = getattr(context.resources, settings_key).load(getattr(context.resources, system_key))
            golden, report = check_golden_health(current, store)
            table_key = golden.sha256[:16]
            info = {
                "golden": {"name": golden.name, "sha256": golden.sha256},
                "summary": dict(report.summary),
                "notes": report.notes,
            }
            attempt = store.write(
                ASSET, table_key, {"findings": report.findings}, info, dagster_run_id=context.run.run_id
            )
        except InputError as exc:
            raise input_failure(exc) from None
        for note in report.notes.values():
            context.log.info(note)
        skipped = {c: report.notes.get(c, "not checked") for c in CHECK_KINDS if report.passed(c) is None}
        limit = current.golden_health.max_shown
        identity = {"name": golden.name, "sha256": golden.sha256}
        meta = {
            "golden_sha256": dg.MetadataValue.text(golden.sha256),
            "golden_name": dg.MetadataValue.text(golden.name or "(unnamed)"),
            "golden_path": dg.MetadataValue.path(golden.info["source"]),
            "queries": dg.MetadataValue.int(int(report.summary["queries"])),
            **{
                f"health/{check}": dg.MetadataValue.int(int(report.summary[check]))
                for check in CHECK_KINDS
                if report.summary[check] is not None
            },
            "not_checked": dg.MetadataValue.json([c for c in CHECK_KINDS if report.summary[c] is None]),
            "report": dg.MetadataValue.md(
                "```\n"
                + "\n".join(summary_lines(report, identity))
                + "\n```\n\n"
                + "\n\n".join(
                    f"## {check}\n\n{markdown_table(report, check, limit)}"
                    for check in CHECK_KINDS
                    if report.summary[check]
                )
            ),
            "findings": _table_metadata(report.findings),
            "notes": dg.MetadataValue.json(report.notes),
            # the checks that could not run, and why (Dagster shows them skipped)
            "skipped_checks": dg.MetadataValue.json(skipped),
            "storage_path": dg.MetadataValue.path(store.attempt_location(ASSET, table_key, attempt)),
        }
        selected = {c.name for c in context.selected_asset_check_keys}
        # blocking as the definitions declared it (their settings), thresholds as the step read them
        checks = [
            result
            for check in CHECK_KINDS
            if check in selected
            and (result := _check_result(key, report, check, limit, _blocking(settings, check))) is not None
        ]
        for check in selected & set(skipped):
            context.log.info(f"check {check} skipped: {skipped[check]}")
        if key not in context.selected_asset_keys:  # only some checks selected: no materialization
            yield from checks
            return
        yield dg.MaterializeResult(
            asset_key=key,
            metadata=meta,
            tags={GOLDEN_SHA_TAG: golden.sha256[:16], GOLDEN_NAME_TAG: _tag_value(golden.name)},
            check_results=checks,
        )

    return golden_health
