"""pipeline.report.data and sections: the trajectory table comes from policy_summary, not Python."""

from __future__ import annotations

from pipeline import db
from pipeline.report import data, sections
from pipeline.report.formatting import fmt, pct, pct_ci, pts_ci
from pipeline.stats import pearson
from tests.stages.test_report import fill_warehouse


def test_policy_summaries_match_a_python_recomputation(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    fill_warehouse(con)
    scores = data.trajectory_scores(con)
    for s in data.policy_summaries(con):
        mine = [r for r in scores if (r["policy_id"], r["purpose"]) == (s["policy_id"], s["purpose"])]
        calls = [r["n_subcalls"] for r in mine]
        assert s["n_trajectories"] == len(mine)
        assert abs(s["calls_size_corr"] - pearson(calls, [r["room_n_documents"] for r in mine])) < 1e-9
        assert abs(s["calls_tokens_corr"] - pearson(calls, [r["room_n_tokens"] for r in mine])) < 1e-9
        done = sum(bool(r["memo_before_delegation_done"]) for r in mine) / len(mine)
        assert abs(s["memo_before_delegation_done"] - done) < 1e-12


def test_undefined_correlation_is_none_and_shown_as_a_dash(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    fill_warehouse(con)
    con.execute("update trajectories set n_subcalls = 3")  # constant: the correlation is undefined
    summaries = data.policy_summaries(con)
    assert summaries and all(s["calls_size_corr"] is None for s in summaries)
    table = sections.trajectories_section({}, summaries).blocks[0]
    assert all(row[-2:] == ["–", "–"] for row in table.rows)


def test_formatting():
    assert pct(None) == "–" and pct(0.4615) == "46.2%"
    assert pct_ci(0.461, 0.4, 0.52) == "46.1% [40.0, 52.0]" and pct_ci(0.5, None, 0.6) == "50.0%"
    assert pts_ci(0.14, 0.08, 0.2) == "+14.0 pts [+8.0, +20.0]" and pts_ci(-0.01, None, None) == "-1.0 pts"
    assert fmt(12600.4, "int") == "12,600" and fmt(3.25, "num1") == "3.2" and fmt(0.171, "num2") == "0.17"
