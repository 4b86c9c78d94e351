import pandas as pd

from kebab_eval_pipeline.compare.verdicts import per_query_verdicts, verdict_counts


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
