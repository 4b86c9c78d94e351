import pandas as pd

from kebab_eval_pipeline.compare.verdicts import flip_counts, per_query_verdicts, verdict_counts


def frame(rows):
    return pd.DataFrame(rows, columns=["query_id", "applicable", "rank", "answerable", "refused"]).astype(
        {"rank": "Int64", "refused": "boolean"}
    )


def test_every_verdict_kind():
    a = frame(
        [
            ("win-new", True, None, True, None),
            ("win-higher", True, 4, True, None),
            ("loss", True, 1, True, None),
            ("regression", True, 2, True, None),
            ("draw-same", True, 3, True, None),
            ("draw-miss", True, None, True, None),
            ("unans-win", False, None, False, False),
            ("unans-reg", False, None, False, True),
            ("only-a", True, 1, True, None),
        ]
    )
    b = frame(
        [
            ("win-new", True, 5, True, None),
            ("win-higher", True, 1, True, None),
            ("loss", True, 2, True, None),
            ("regression", True, None, True, None),
            ("draw-same", True, 3, True, None),
            ("draw-miss", True, None, True, None),
            ("unans-win", False, None, False, True),
            ("unans-reg", False, None, False, False),
            ("only-b", True, 1, True, None),
        ]
    )
    v = per_query_verdicts(a, b).set_index("query_id")
    assert v.loc["win-new", "verdict"] == "win" and v.loc["win-higher", "verdict"] == "win"
    assert v.loc["loss", "verdict"] == "loss" and v.loc["regression", "verdict"] == "regression"
    assert v.loc["draw-same", "note"] == "same rank" and v.loc["draw-miss", "note"] == "both missed"
    assert v.loc["unans-win", "verdict"] == "win" and v.loc["unans-reg", "verdict"] == "regression"
    assert v.loc["only-a", "verdict"] == "only_a" and v.loc["only-b", "verdict"] == "only_b"
    assert v.loc["win-higher", "a_rank"] == 4 and v.loc["win-higher", "b_rank"] == 1
    counts = verdict_counts(v.reset_index())
    assert counts == {
        "win": 3,
        "loss": 1,
        "regression": 2,
        "draw": 2,
        "not_scored": 0,
        "only_a": 1,
        "only_b": 1,
    }


def test_unanswerable_without_answers_is_not_scored():
    a = frame([("u", False, None, False, None)])
    v = per_query_verdicts(a, a)
    assert v["verdict"].tolist() == ["not_scored"]


def flip_frame(rows):
    return pd.DataFrame(
        rows, columns=["query_id", "applicable", "rank", "answerable", "refused", "grounded"]
    ).astype({"rank": "Int64", "refused": "boolean", "grounded": "float64"})


def test_answer_flips_need_answers_in_both_runs():
    a = flip_frame(
        [
            ("to-refusal", True, 1, True, False, 1.0),
            ("to-answer", True, 1, True, True, None),
            ("ungrounded", True, 1, True, False, 1.0),
            ("grounded", True, 1, True, False, 0.0),
            ("no-answer-a", True, 1, True, None, None),
            ("steady", True, 1, True, False, 1.0),
        ]
    )
    b = flip_frame(
        [
            ("to-refusal", True, 1, True, True, None),
            ("to-answer", True, 1, True, False, 1.0),
            ("ungrounded", True, 1, True, False, 0.0),
            ("grounded", True, 1, True, False, 1.0),
            ("no-answer-a", True, 1, True, True, None),
            ("steady", True, 1, True, False, 1.0),
        ]
    )
    v = per_query_verdicts(a, b).set_index("query_id")
    assert v.loc["to-refusal", "refusal_flip"] == "answered→refused"
    assert v.loc["to-answer", "refusal_flip"] == "refused→answered"
    assert v.loc["ungrounded", "groundedness_flip"] == "grounded→ungrounded"
    assert v.loc["grounded", "groundedness_flip"] == "ungrounded→grounded"
    for qid in ("no-answer-a", "steady"):
        assert pd.isna(v.loc[qid, "refusal_flip"]) and pd.isna(v.loc[qid, "groundedness_flip"])
    # A refusal has no groundedness score: no groundedness flip beside a refusal flip.
    assert pd.isna(v.loc["to-refusal", "groundedness_flip"])
    assert flip_counts(v.reset_index()) == {
        "answered→refused": 1,
        "refused→answered": 1,
        "grounded→ungrounded": 1,
        "ungrounded→grounded": 1,
    }
    # The retrieval verdicts are unaffected by the answers.
    assert set(v["verdict"]) == {"draw"}


def test_frames_without_grounded_column_still_compare():
    a = frame([("q", True, 2, True, False)])
    b = frame([("q", True, 1, True, True)])
    v = per_query_verdicts(a, b).iloc[0]
    assert (v["verdict"], v["refusal_flip"]) == ("win", "answered→refused") and pd.isna(
        v["groundedness_flip"]
    )
