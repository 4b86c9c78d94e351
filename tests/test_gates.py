"""Gates as pure functions (SPEC §7): absolute bounds on metrics and slices, regression bounds."""

import json
import math

import pandas as pd
import pytest
from scipy import stats

from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.compare.settings import CompareSettings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.gates.evaluate import (
    GateTarget,
    PairedEvidence,
    check_gate_names,
    check_name,
    evaluate_gate,
    evaluate_gates,
    evaluate_regression_gate,
    evaluate_verdict_gate,
    known_metric,
    parse_gate_key,
)
from kebab_eval_pipeline.gates.settings import GateSettings, RegressionGateSettings, VerdictGateSettings
from tests.replay_case import cli, write_case


def test_min_gate_pass_and_fail_carry_numbers():
    [ok] = evaluate_gate("mrr", GateSettings(min=0.5), {"mrr": 0.61})
    assert ok.passed and ok.value == 0.61 and ok.threshold == 0.5 and ok.delta == 0.11
    [bad] = evaluate_gate("mrr", GateSettings(min=1.01), {"mrr": 0.61})
    assert not bad.passed and bad.delta == -0.4 and bad.blocking and bad.name == "gate_mrr_min"


def test_min_and_max_give_two_results():
    results = evaluate_gate("hit@5", GateSettings(min=0.2, max=0.9), {"hit@5": 0.95})
    assert [(r.kind, r.passed) for r in results] == [("min", True), ("max", False)]
    assert results[0].name == "gate_hit_at_5_min"


def test_a_value_on_the_threshold_passes_both_ways():
    assert evaluate_gate("chr", GateSettings(min=0.75, max=0.75), {"chr": 0.75})[0].passed
    assert evaluate_gate("chr", GateSettings(min=0.75, max=0.75), {"chr": 0.75})[1].passed


def test_null_metric_fails_unless_skipped():
    [r] = evaluate_gate("chr", GateSettings(min=0.75), {"chr": None})
    assert not r.passed and not r.skipped and "null" in r.reason and r.value is None and r.delta is None
    [s] = evaluate_gate("chr", GateSettings(min=0.75, skip_if_null=True), {"chr": float("nan")})
    assert s.passed and s.skipped


def test_warning_gates_are_not_blocking():
    [r] = evaluate_gate("mrr", GateSettings(min=0.9, blocking=False), {"mrr": 0.5})
    assert not r.passed and not r.blocking


# ------------------------------------------------------------------------------ slices

BREAKDOWNS = pd.DataFrame(
    {
        "dimension": ["lang", "lang", "lang", "tag", "category"],
        "value": ["en", "ko", "ko", "critical", "recency"],
        "metric": ["mrr", "mrr", "hit@5", "mrr", "mrr"],
        "score": [0.8, 0.42, float("nan"), 0.5, 0.7],
        "n": [10, 5, 0, 3, 2],
    }
)


def test_gate_keys_name_a_metric_or_a_slice():
    assert parse_gate_key("mrr") == GateTarget("mrr")
    assert parse_gate_key("hit@5[tag=critical]") == GateTarget("hit@5", "tag", "critical")
    assert parse_gate_key("mrr[ lang = ko ]") == GateTarget("mrr", "lang", "ko")
    assert parse_gate_key("mrr[lang=ko]").label == "mrr[lang=ko]"
    with pytest.raises(ValueError, match="unknown breakdown dimension 'language'"):
        parse_gate_key("mrr[language=ko]")
    with pytest.raises(ValueError, match="malformed gate key"):
        parse_gate_key("mrr[lang=ko")


def test_slice_gates_read_the_breakdown_table():
    [ko] = evaluate_gate("mrr[lang=ko]", GateSettings(min=0.5), {"mrr": 0.9}, BREAKDOWNS)
    assert not ko.passed and ko.value == 0.42 and ko.delta == -0.08 and ko.metric == "mrr[lang=ko]"
    assert ko.name == "gate_mrr_lang_ko_min" and "mrr[lang=ko] = 0.4200 misses ≥ 0.5" in ko.reason
    [en] = evaluate_gate("mrr[lang=en]", GateSettings(min=0.5), {"mrr": 0.1}, BREAKDOWNS)
    assert en.passed and en.value == 0.8


def test_an_absent_or_empty_slice_is_null():
    [absent] = evaluate_gate("mrr[lang=fr]", GateSettings(min=0.5), {}, BREAKDOWNS)
    assert not absent.passed and "no query has lang = 'fr'" in absent.reason
    [empty] = evaluate_gate("hit@5[lang=ko]", GateSettings(min=0.5, skip_if_null=True), {}, BREAKDOWNS)
    assert empty.passed and empty.skipped and "no query of the slice is in its denominator" in empty.reason


def test_check_names_stay_unique_for_non_ascii_slices():
    a, b = check_name("mrr[category=사실]", "min"), check_name("mrr[category=추론]", "min")
    assert a != b and a.startswith("gate_mrr_category_") and a.endswith("_min")
    assert check_name("recall_all@10", "max") == "gate_recall_all_at_10_max"
    assert check_name("mrr[tag=a-b]", "min") != check_name("mrr[tag=a_b]", "min")


def test_evaluate_gates_includes_the_wfgy_defaults_and_slices():
    settings = settings_from_dict({"gates": {"mrr[lang=ko]": {"min": 0.4}}})
    results = {r.name: r for r in evaluate_gates(settings, {"mrr": 0.5, "chr": None}, BREAKDOWNS)}
    assert results["gate_mrr_lang_ko_min"].passed
    assert results["gate_chr_min"].skipped and not results["gate_chr_min"].blocking  # WFGY default


def test_config_validation_lists_every_bad_gate():
    settings = settings_from_dict(
        {
            "gates": {
                "mrrr": {"min": 0.1},
                "mrr[language=ko]": {"min": 0.1},
                "index_chunks[lang=ko]": {"min": 1},
                "hit@7": {"min": 0.1},
                "mrr[lang=ko]": {"min": 0.1},  # fine
                "index_zero_chunk_rate": {"max": 0.0},  # fine
            },
            "regression_gates": {"total_suite_ms": {"max_p": 0.05}, "mrr": {"max_p": 0.05}},
        }
    )
    with pytest.raises(InputError) as info:
        check_gate_names(settings)
    fields = [o.field for o in info.value.offenders]
    assert fields == [
        "gates.mrrr",
        "gates.mrr[language=ko]",
        "gates.index_chunks[lang=ko]",
        "gates.hit@7",
        "gates.regression.total_suite_ms.max_p",
    ]


# -------------------------------------------------------------------------- regression


def test_regression_max_drop():
    g = RegressionGateSettings(max_drop=0.02)
    [ok] = evaluate_regression_gate("mrr", g, {"mrr": 0.60}, {"mrr": 0.61})
    assert ok.passed and ok.kind == "max_drop" and ok.name == "gate_mrr_max_drop"
    [r] = evaluate_regression_gate("mrr", g, {"mrr": 0.55}, {"mrr": 0.61})
    assert not r.passed and math.isclose(r.delta, -0.06) and r.threshold == 0.02  # as configured
    [s] = evaluate_regression_gate("mrr", g, {"mrr": 0.1}, None)
    assert s.skipped and s.passed
    [n] = evaluate_regression_gate("mrr", g, {"mrr": None}, {"mrr": 0.5})
    assert not n.passed and "null in this run" in n.reason


def test_regression_default_is_no_drop_at_all():
    assert RegressionGateSettings().max_drop == 0.0
    assert RegressionGateSettings(max_p=0.05).max_drop is None


def test_regression_max_p_fails_only_a_significant_drop():
    g = RegressionGateSettings(max_p=0.05)
    metrics, base = {"mrr": 0.5}, {"mrr": 0.6}

    def run(delta, p):
        return evaluate_regression_gate(
            "mrr", g, metrics, base, PairedEvidence(delta, p, 100, "randomization")
        )[0]

    bad = run(-0.1, 0.001)
    assert not bad.passed and bad.kind == "max_p" and bad.name == "gate_mrr_max_p"
    assert bad.value == bad.p_value == 0.001 and bad.threshold == 0.05 and bad.delta == -0.1
    assert "significantly worse at p < 0.05" in bad.reason and "100 paired queries" in bad.reason
    assert run(-0.1, 0.2).passed  # a drop, but within noise
    assert run(+0.1, 0.001).passed  # a significant gain
    assert run(0.0, 1.0).passed
    missing = evaluate_regression_gate("mrr", g, metrics, base, None)[0]
    assert not missing.passed and "no p-value" in missing.reason
    skipped = evaluate_regression_gate(
        "mrr", RegressionGateSettings(max_p=0.05, skip_if_null=True), metrics, base, None
    )[0]
    assert skipped.passed and skipped.skipped


def test_regression_with_both_bounds_gives_two_results():
    g = RegressionGateSettings(max_drop=0.05, max_p=0.05)
    results = evaluate_regression_gate(
        "hit@1", g, {"hit@1": 0.58}, {"hit@1": 0.6}, PairedEvidence(-0.02, 0.01, 500, "mcnemar_exact")
    )
    assert [(r.kind, r.passed) for r in results] == [("max_drop", True), ("max_p", False)]


def test_metric_names():
    assert (
        known_metric("hit@5", [1, 5]) and not known_metric("hit@7", [1, 5]) and not known_metric("mrrr", [5])
    )
    assert known_metric("recency_correctness", [1]) and known_metric("scope_miss_rate", [1])


def test_the_trec_measures_and_judged_at_k_are_gateable():
    """map and map@k (one stem, plain and @k), rprec, bpref and judged@k: absolute, per-slice and
    regression gates; judged@k (a coverage diagnostic, direction none) gates as higher-is-better."""
    assert known_metric("map", [5]) and known_metric("map@5", [5]) and not known_metric("map@7", [5])
    assert known_metric("rprec", [1]) and known_metric("bpref", [1]) and known_metric("judged@10", [10])
    assert not known_metric("rprec@5", [5]) and not known_metric("judged", [5])
    settings = settings_from_dict(
        {
            "gates": {"map": {"min": 0.3}, "map@10[lang=ko]": {"min": 0.2}, "judged@10": {"min": 0.8}},
            "regression_gates": {"bpref": {"max_drop": 0.01, "max_p": 0.05}, "rprec": {"max_drop": 0.0}},
        }
    )
    check_gate_names(settings)  # every key is known, sliceable and testable
    breakdowns = pd.DataFrame(
        {"dimension": ["lang"], "value": ["ko"], "metric": ["map@10"], "score": [0.1], "n": [4]}
    )
    metrics = {"map": 0.35, "map@10": 0.3, "judged@10": 0.75}
    results = {r.name: r for r in evaluate_gates(settings, metrics, breakdowns)}
    assert results["gate_map_min"].passed
    assert (
        not results["gate_map_at_10_lang_ko_min"].passed
        and results["gate_map_at_10_lang_ko_min"].value == 0.1
    )
    assert not results["gate_judged_at_10_min"].passed  # 0.75 < 0.8: too few hits judged
    [drop] = evaluate_regression_gate(
        "bpref", RegressionGateSettings(max_drop=0.01), {"bpref": 0.4}, {"bpref": 0.5}
    )
    assert not drop.passed and math.isclose(drop.delta, -0.1)


def test_for_rates_of_bad_events_a_rise_is_the_regression():
    g = RegressionGateSettings(max_drop=0.01, max_p=0.05)
    rise = evaluate_regression_gate(
        "error_rate",
        g,
        {"error_rate": 0.10},
        {"error_rate": 0.02},
        PairedEvidence(0.08, 0.001, 50, "mcnemar_exact"),
    )
    assert [r.passed for r in rise] == [False, False] and "allowed rise 0.01" in rise[0].reason
    fall = evaluate_regression_gate(
        "over_refusal_rate",
        g,
        {"over_refusal_rate": 0.02},
        {"over_refusal_rate": 0.10},
        PairedEvidence(-0.08, 0.001, 50, "mcnemar_exact"),
    )
    assert [r.passed for r in fall] == [True, True]


# -------------------------------------------------------------------------- verdict gates


def _per_query() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": ["crit-1", "crit-2", "plain-1", "plain-2", "ko-1"],
            "verdict": ["regression", "draw", "regression", "loss", "regression"],
            "tags": [["critical"], ["critical", "ops"], [], ["ops"], ["critical"]],
            "category": ["factual", "factual", "how_to", "how_to", "factual"],
            "lang": ["en", "en", "en", "en", "ko"],
            "difficulty": ["easy"] * 5,
            "answerable": [True, True, True, False, True],
        }
    )


def test_verdict_gates_come_from_the_regression_block():
    settings = settings_from_dict(
        {
            "gates": {
                "regression": {
                    "mrr": {"max_drop": 0.02},
                    "regression[tag=critical]": {"max": 0},
                    "loss": {"max": 3, "blocking": False},
                }
            }
        }
    )
    assert set(settings.regression_gates) == {"mrr"}
    assert set(settings.verdict_gates) == {"regression[tag=critical]", "loss"}
    assert settings.verdict_gates["loss"].max == 3 and not settings.verdict_gates["loss"].blocking
    check_gate_names(settings)  # valid


def test_verdict_gate_counts_the_slice_and_names_the_queries():
    gate = VerdictGateSettings()  # max 0: any such verdict fails
    result = evaluate_verdict_gate("regression[tag=critical]", gate, _per_query(), has_baseline=True)
    assert not result.passed and result.value == 2.0 and result.threshold == 0 and result.delta == 2.0
    assert result.name == "gate_regression_tag_critical_max" and result.kind == "max"
    assert "crit-1, ko-1" in result.reason and "plain-1" not in result.reason
    ko = evaluate_verdict_gate("regression[lang=ko]", gate, _per_query(), has_baseline=True)
    assert ko.value == 1.0 and "ko-1" in ko.reason
    assert evaluate_verdict_gate("regression", VerdictGateSettings(max=3), _per_query(), True).passed
    unanswerable = evaluate_verdict_gate("loss[answerable=false]", gate, _per_query(), True)
    assert unanswerable.value == 1.0 and "plain-2" in unanswerable.reason
    assert evaluate_verdict_gate("loss[tag=critical]", gate, _per_query(), True).passed


def test_verdict_gate_without_baseline_is_skipped():
    result = evaluate_verdict_gate("regression[tag=critical]", VerdictGateSettings(), _per_query(), False)
    assert result.passed and result.skipped and "no baseline" in result.reason


def test_bad_verdict_gate_keys_are_listed():
    settings = settings_from_dict(
        {"verdict_gates": {"regression[colour=red]": {"max": 0}, "wins": {"max": 0}}}
    )
    with pytest.raises(InputError) as info:
        check_gate_names(settings)
    assert [o.field for o in info.value.offenders] == [
        "gates.regression.regression[colour=red]",
        "gates.regression.wins",
    ]


def test_max_p_reads_the_adjusted_p_unless_configured_raw():
    g = RegressionGateSettings(max_p=0.05)
    evidence = PairedEvidence(-0.1, 0.02, 100, "randomization", p_adjusted=0.06, adjusted_by="holm")
    adjusted = evaluate_regression_gate("mrr", g, {"mrr": 0.5}, {"mrr": 0.6}, evidence)[0]
    # raw 0.02 would fail; Holm over the gated metrics lifts it to 0.06: not significant.
    assert adjusted.passed and adjusted.p_value == 0.06 and adjusted.p_raw == 0.02
    assert "Holm-adjusted p = 0.06, raw p = 0.02" in adjusted.reason and "not significant" in adjusted.reason
    raw = evaluate_regression_gate(
        "mrr", g, {"mrr": 0.5}, {"mrr": 0.6}, evidence, CompareSettings(significance="raw")
    )[0]
    assert not raw.passed and raw.p_value == 0.02 and "unadjusted, as configured" in raw.reason


def test_a_drop_within_the_repeats_noise_floor_is_not_a_regression():
    g = RegressionGateSettings(max_drop=0.01)
    noisy = PairedEvidence(-0.02, 0.4, 100, "randomization", noise_floor=0.03, within_noise=True)
    result = evaluate_regression_gate("mrr", g, {"mrr": 0.5}, {"mrr": 0.52}, noisy)[0]
    assert result.passed and "within the repeats' noise floor 0.0300: not a regression" in result.reason
    beyond = PairedEvidence(-0.02, 0.4, 100, "randomization", noise_floor=0.01, within_noise=False)
    assert not evaluate_regression_gate("mrr", g, {"mrr": 0.5}, {"mrr": 0.52}, beyond)[0].passed
    assert not evaluate_regression_gate("mrr", g, {"mrr": 0.5}, {"mrr": 0.52}, None)[0].passed


# ------------------------------------------------------------------------------ the (none) slice


def test_an_empty_slice_value_selects_the_none_slice_the_breakdowns_name():
    """``mrr[lang=]`` and ``mrr[lang=(none)]`` both gate the queries without a lang — the slice the
    breakdowns list as ``lang=(none)`` — keeping the check names they always had."""
    none = GateTarget("mrr", "lang", "(none)")
    assert parse_gate_key("mrr[lang=]") == parse_gate_key("mrr[lang=(none)]") == none
    assert parse_gate_key("mrr[lang= ]").label == "mrr[lang=(none)]"
    breakdowns = pd.concat(
        [
            BREAKDOWNS,
            pd.DataFrame(
                {"dimension": ["lang"], "value": ["(none)"], "metric": ["mrr"], "score": [0.3], "n": [4]}
            ),
        ],
        ignore_index=True,
    )
    [empty] = evaluate_gate("mrr[lang=]", GateSettings(min=0.5), {"mrr": 0.9}, breakdowns)
    assert not empty.passed and empty.value == 0.3 and empty.name == "gate_mrr_lang_none_min"
    assert "mrr[lang=(none)] = 0.3000 misses ≥ 0.5" in empty.reason
    [written] = evaluate_gate("mrr[lang=(none)]", GateSettings(max=0.5), {"mrr": 0.9}, breakdowns)
    assert written.passed and written.value == 0.3 and written.name.startswith("gate_mrr_lang__none__")
    [everyone] = evaluate_gate("mrr[lang=]", GateSettings(min=0.5), {"mrr": 0.9}, BREAKDOWNS)
    assert (
        not everyone.passed and "every query has a lang (no query is in the (none) slice)" in everyone.reason
    )


def test_a_verdict_gate_on_the_none_slice_counts_the_queries_without_a_value():
    per_query = _per_query()
    per_query["lang"] = ["en", None, "", "en", "ko"]  # crit-2 and plain-1 have no lang
    result = evaluate_verdict_gate("regression[lang=]", VerdictGateSettings(), per_query, has_baseline=True)
    assert result.value == 1.0 and "among queries without a lang" in result.reason
    assert "plain-1" in result.reason and "crit-1" not in result.reason


def test_an_empty_tag_or_one_slice_written_twice_is_refused_at_load():
    settings = settings_from_dict(
        {
            "gates": {
                "mrr[tag=]": {"min": 0.5},
                "mrr[lang=]": {"min": 0.5},
                "mrr[lang=(none)]": {"min": 0.6},
                "regression": {"regression[lang=]": {"max": 0}, "regression[lang=(none)]": {"max": 1}},
            }
        }
    )
    with pytest.raises(InputError) as caught:
        check_gate_names(settings, "cfg.yaml")
    text = str(caught.value)
    assert "'gates.mrr[tag=]': 'mrr[tag=]' names no tag" in text and "mrr[tag=critical]" in text
    assert (
        "'gates.mrr[lang=(none)]': gates the same slice as gates.mrr[lang=] (mrr[lang=(none)]); keep one"
        in text
    )
    assert "'gates.regression.regression[lang=(none)]': gates the same slice as" in text


def test_a_gate_on_an_empty_slice_value_through_the_cli(tmp_path):
    """Issue 44: ``mrr[lang=]`` loaded, then failed the run with "no query has lang = ''" while the
    breakdowns listed those queries as lang=(none). Now it gates that slice: Q2 (MRR 1) and Q3 (0)."""
    write_case(tmp_path, gates={"mrr[lang=]": {"min": 0.6}, "mrr[lang=ko]": {"min": 0.5}})
    run = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "sliced")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "gate FAIL gate_mrr_lang_none_min: mrr[lang=(none)] = 0.5000 misses ≥ 0.6" in run.stdout
    assert "gate pass gate_mrr_lang_ko_min: mrr[lang=ko] = 1.0000 meets ≥ 0.5" in run.stdout
    export = cli(tmp_path, "export", "sliced", "--format", "json", "--out", "run.json")
    assert export.returncode == 0, export.stderr
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert doc["breakdowns"]["lang"]["(none)"]["mrr"] == 0.5  # the slice the gate read
    write_case(tmp_path, gates={"mrr[tag=]": {"min": 0.6}})
    refused = cli(tmp_path, "run", "--config", "cfg.yaml", "--run-id", "refused")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cfg.yaml — field 'gates.mrr[tag=]': 'mrr[tag=]' names no tag" in refused.stderr


def test_a_verdict_gate_says_what_noise_alone_would_give():
    """Two systems with no real difference flip as many queries one way as the other: 3
    regressions against 3 queries b newly found are a fair coin's work (P ≥ 3 of 6 = 0.66), 3
    against none are not (P = 1/8) — the sign test's tail, checked against scipy's binomtest."""
    notes = {"regression": "a found a relevant hit, b missed", "win": "b found a relevant hit a missed"}
    verdicts = ["regression"] * 3 + ["win"] * 3 + ["win", "draw"]
    per_query = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(8)],
            "verdict": verdicts,
            "note": [notes.get(v, "same rank") for v in verdicts[:6]]
            + ["b ranks the first relevant hit higher", "same rank"],
            "tags": [[]] * 8,
        }
    )
    result = evaluate_verdict_gate("regression", VerdictGateSettings(), per_query, True)
    p = stats.binomtest(3, 6, 0.5, alternative="greater").pvalue
    assert not result.passed and "against 3 the other way" in result.reason
    assert f"shows 3 or more with probability {p:.2g}" in result.reason and p == pytest.approx(0.65625)
    alone = evaluate_verdict_gate("regression", VerdictGateSettings(), per_query.iloc[[0, 1, 2, 7]], True)
    assert "against 0 the other way" in alone.reason and "probability 0.12" in alone.reason
