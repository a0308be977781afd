"""pipeline.metrics: the behaviour metric list and the evaluation's headline line."""

from __future__ import annotations

from pipeline.metrics import BEHAVIOUR, BEHAVIOUR_NAMES, base_first, by_policy, headline


def _row(pid: str, metric: str, value: float, lo: float | None = None, hi: float | None = None) -> dict:
    return {"policy_id": pid, "metric": metric, "value": value, "ci_low": lo, "ci_high": hi}


def test_headline_one_line_per_policy_in_row_order():
    rows = [
        _row("pol-base", "score", 0.461, 0.40, 0.52),
        _row("pol-base", "coverage", 0.6, 0.5, 0.7),
        _row("pol-sft", "score", 0.601, 0.55, 0.65),
        _row("pol-sft", "lift", 0.14, 0.08, 0.2),
        _row("pol-none", "coverage", 0.1, 0.0, 0.2),
    ]
    assert headline(rows).splitlines() == [
        "pol-base: held-out score 0.461 [95% CI 0.400, 0.520]",
        "pol-sft: held-out score 0.601 [95% CI 0.550, 0.650]; lift vs base +0.140 [95% CI +0.080, +0.200]",
        "pol-none",
    ]


def test_headline_of_no_rows_is_empty():
    assert headline([]) == ""


def test_behaviour_names_are_unique_and_formatted():
    assert len(set(BEHAVIOUR_NAMES)) == len(BEHAVIOUR) == 10
    assert {"memo_before_delegation_done", "budget_used"} <= set(BEHAVIOUR_NAMES)
    assert {m.kind for m in BEHAVIOUR} <= {"pct", "int", "num1", "num2"}


def test_by_policy_and_base_first():
    rows = [_row("b", "score", 0.1), _row("a", "score", 0.2), _row("base", "lift", 0.0)]
    by = by_policy(rows)
    assert list(by) == ["b", "a", "base"] and by["a"]["score"]["value"] == 0.2
    assert base_first(by, "base") == ["base", "a", "b"]
