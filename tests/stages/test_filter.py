"""The rejection filter's SQL rules, funnel and zero-accepted error, on a real DuckDB file."""

import pytest

from pipeline import db
from pipeline.config import ConfigError, load_config
from pipeline.grading.reference import GRADER_VERSION
from pipeline.harness.trace import Trace, Turn
from pipeline.rooms import store
from pipeline.rooms.model import Criterion, Document, Room
from pipeline.trace_store import TraceWriter, trajectory_id
from pipeline.training.errors import NoAcceptedTrajectories
from stages import filter as filter_stage
from tests.doubles import memo_score_row


def _id(i: int) -> str:
    return trajectory_id("p1", "r1", "train", i)


def _named(rows, specs) -> dict:
    """{spec name: value} from (trajectory_id, value) rows; spec i is sample index i."""
    names = {_id(i): spec[0] for i, spec in enumerate(specs)}
    return {names[tid]: v for tid, v in rows}


def _warehouse(tmp_path, specs):
    """specs: (tid, status, n_passed of 4, coverage in [0,1], code); recall = n_passed / 4, precision 1."""
    cfg = load_config("tiny", [f"run.dir={tmp_path}"])
    con = db.connect(cfg.run.db_path)
    room = Room(
        "r1",
        {"name": "T"},
        {"type": "merger"},
        [Document("a/x.txt", "corporate", "x", "text")],
        [Criterion(f"c{i}", "identify", "t") for i in range(4)],
    )
    store.save_room(con, room)
    w = TraceWriter(con)
    for i, (_name, status, n_passed, cov, code) in enumerate(specs):
        tid = _id(i)
        tr = Trace(tid, "r1", "p1", status=status, memo="m", started_at="2026-12-01T00:00:00")
        # code None: the root never answered (an episode cut before its first completion)
        if code is not None:
            tr.turns = [Turn(0, [{"role": "user", "content": "task"}], f"```python\n{code}\n```", code)]
        cov_rows = [
            {
                "trajectory_id": tid,
                "scope": "all",
                "grouping": "total",
                "group_value": "",
                "n_probes": 10,
                "n_seen": int(cov * 10),
            }
        ]
        w.add_trace(tr, room_id="r1", policy_id="p1", sample_index=i, purpose="train", coverage=cov_rows)
        w.flush()
        db.write_many(
            con,
            {
                "grades": [
                    {
                        "trajectory_id": tid,
                        "criterion_id": f"c{k}",
                        "judge": "reference",
                        "passed": k < n_passed,
                        "graded_at": db.now(),
                        "kind": "identify",
                        "is_trap": False,
                        "grader_version": GRADER_VERSION,
                    }
                    for k in range(4)
                ],
                "memo_scores": [memo_score_row(tid, n_passed / 4)],
            },
        )
    con.close()
    return cfg


def test_rules_in_funnel_order(tmp_path, capsys):
    specs = [
        ("t-ok", "submitted", 4, 1.0, "a()"),
        ("t-dup", "submitted", 3, 1.0, "a()"),  # same code as t-ok, lower score
        ("t-unfinished", "turn_limit", 4, 1.0, "b()"),
        ("t-low", "submitted", 1, 1.0, "c()"),
        ("t-narrow", "submitted", 4, 0.2, "d()"),
        ("t-silent", "timeout", 4, 1.0, None),
    ]
    cfg = _warehouse(tmp_path, specs)
    cfg.filter.require_submit = True
    cfg.filter.min_score = 0.5
    cfg.filter.min_coverage = 0.5
    counts = filter_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    reasons = _named(con.execute("select trajectory_id, reason from selections").fetchall(), specs)
    assert reasons == {
        "t-ok": "accepted",
        "t-dup": "duplicate",
        "t-unfinished": "not_finished",
        "t-low": "score",
        "t-narrow": "coverage",
        "t-silent": "no_root_turn",
    }
    funnel = con.execute(
        "select sampled, finished, passed_score, passed_coverage, accepted from rejection_funnel "
        "where room_id = ''"
    ).fetchone()
    assert funnel == (6, 4, 3, 2, 1)
    assert counts["accepted"] == 1
    out = capsys.readouterr().out
    assert "ALL" in out and "r1" in out
    # rerun with the same inputs reuses the selection
    con.close()
    assert filter_stage.run(cfg)["reused"] is True


def test_a_trajectory_without_a_root_turn_is_rejected_even_by_loose_filters(tmp_path):
    specs = [("t-ok", "submitted", 1, 0.1, "a()"), ("t-silent", "timeout", 0, 0.0, None)]
    cfg = _warehouse(tmp_path, specs)
    cfg.filter.require_submit, cfg.filter.min_score, cfg.filter.min_coverage = False, 0.0, 0.0
    assert filter_stage.run(cfg)["accepted"] == 1
    con = db.connect(cfg.run.db_path)
    reasons = _named(con.execute("select trajectory_id, reason from selections").fetchall(), specs)
    con.close()
    assert reasons == {"t-ok": "accepted", "t-silent": "no_root_turn"}


def test_zero_accepted_is_an_error_with_exit_1(tmp_path, capsys):
    cfg = _warehouse(tmp_path, [("t-low", "submitted", 0, 1.0, "a()")])
    cfg.filter.min_score = 0.9
    with pytest.raises(NoAcceptedTrajectories, match="0 of 1"):
        filter_stage.run(cfg)
    from pipeline.cli import main

    assert main(["--recipe", "tiny", "filter", f"run.dir={tmp_path}", "filter.min_score=0.9"]) == 1
    assert "0 of 1 trajectories accepted" in capsys.readouterr().err


def test_top_k_and_relative_to_room_mean(tmp_path):
    specs = [
        ("t1", "submitted", 4, 1.0, "a()"),
        ("t2", "submitted", 3, 1.0, "b()"),
        ("t3", "submitted", 2, 1.0, "c()"),
    ]
    cfg = _warehouse(tmp_path, specs)
    cfg.filter.min_score = 0.0
    cfg.filter.min_coverage = 0.0
    cfg.filter.top_k_per_room = 1
    filter_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    rows = _named(con.execute("select trajectory_id, reason from selections").fetchall(), specs)
    assert rows == {"t1": "accepted", "t2": "top_k", "t3": "top_k"}
    con.close()
    cfg.filter.top_k_per_room = None
    cfg.filter.min_relative_to_room_mean = 0.0  # room mean is 0.75: t3 (0.5) falls below
    counts = filter_stage.run(cfg)
    assert counts["reasons"] == {"accepted": 2, "score": 1}


def test_the_filter_ranks_by_the_judge_it_is_told_to_read(tmp_path, capsys):
    """filter.judge=llm: the LLM judge's headline decides, and trajectories it never graded are not considered."""
    specs = [
        ("t-ref-good", "submitted", 4, 1.0, "a()"),  # the reference judge passes all four criteria
        ("t-ref-bad", "submitted", 0, 1.0, "b()"),
        ("t-ungraded", "submitted", 4, 1.0, "c()"),  # no LLM judge grade
    ]
    cfg = _warehouse(tmp_path, specs)
    cfg.filter.min_score = 0.5
    cfg.filter.min_coverage = 0.0
    judge = f"llm:{cfg.models.judge.model or cfg.models.judge.kind}"
    con = db.connect(cfg.run.db_path)
    # the LLM judge disagrees with the reference judge on both graded trajectories
    db.write_many(
        con,
        {"memo_scores": [memo_score_row(_id(0), 0.0, judge=judge), memo_score_row(_id(1), 1.0, judge=judge)]},
    )
    con.close()
    assert filter_stage.run(cfg)["reasons"] == {
        "accepted": 2,
        "score": 1,
    }  # the reference judge reads all three
    cfg.filter.judge = "llm"
    counts = filter_stage.run(cfg)
    assert counts["reasons"] == {"accepted": 1, "score": 1}
    con = db.connect(cfg.run.db_path)
    sel = counts["selection_id"]
    rows = con.execute(
        "select trajectory_id, reason from selections where selection_id = ?", [sel]
    ).fetchall()
    con.close()
    assert _named(rows, specs) == {"t-ref-good": "score", "t-ref-bad": "accepted"}

    from pipeline.cli import main

    capsys.readouterr()
    assert main(["--recipe", "tiny", "filter", f"run.dir={tmp_path}", "filter.judge=gpt"]) == 1
    err = capsys.readouterr().err
    assert "filter.judge" in err and "gpt" in err and len(err.strip().splitlines()) == 1


def test_a_filter_judge_that_graded_nothing_is_a_one_line_error(tmp_path, capsys):
    _warehouse(tmp_path, [("t", "submitted", 4, 1.0, "a()")])
    from pipeline.cli import main

    assert main(["--recipe", "tiny", "filter", f"run.dir={tmp_path}", "filter.judge=llm"]) == 1
    err = capsys.readouterr().err
    assert "no training trajectories graded by llm:" in err and "grade.judges" in err


def test_cost_weight_ranks_the_cheaper_of_two_good_programs_first(tmp_path):
    """filter.cost_weight: a room's top_k keeps score - weight x cost_usd, cost from the recipe's prices."""
    specs = [
        ("dear", "submitted", 4, 1.0, "read_everything()"),  # scores 1.0, many subagent tokens
        ("cheap", "submitted", 3, 1.0, "read_what_matters()"),  # scores 0.75, few
    ]
    cfg = _warehouse(tmp_path, specs)
    con = db.connect(cfg.run.db_path)
    try:
        # the subagents' prompt tokens, priced at 10 USD per million (model_prices): 0.05 and 0.005 USD
        call = dict(call_index=0, turn_index=0, depth=1, parent_call=None, model="reader", prompt="p", response="r",
                    error=None, completion_tokens=0, latency_s=0.1, issued_s=0.0, returned_s=0.1)  # fmt: skip
        db.write_rows(
            con,
            "subcalls",
            [{**call, "trajectory_id": _id(i), "prompt_tokens": n} for i, n in enumerate((5000, 500))],
        )
        db.write_rows(con, "model_prices", [
            {"model": "reader", "role": "subagent", "usd_per_mtok_in": 10.0, "usd_per_mtok_out": 10.0,
             "recorded_at": db.now()}
        ])  # fmt: skip
        costs = dict(
            con.execute(
                "select trajectory_id, cost_usd from trajectory_scores order by trajectory_id"
            ).fetchall()
        )
    finally:
        con.close()
    assert costs[_id(0)] == pytest.approx(0.05) and costs[_id(1)] == pytest.approx(0.005)
    cfg.filter.min_score = 0.0
    cfg.filter.min_coverage = 0.0
    cfg.filter.top_k_per_room = 1
    filter_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    first = _named(con.execute("select trajectory_id, reason from selections").fetchall(), specs)
    con.close()
    assert first == {"dear": "accepted", "cheap": "top_k"}  # by score alone
    cfg.filter.cost_weight = 10.0  # 1.0 - 0.5 < 0.75 - 0.05
    sel = filter_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    rows = con.execute(
        "select trajectory_id, reason from selections where selection_id = ?", [sel["selection_id"]]
    ).fetchall()
    con.close()
    assert _named(rows, specs) == {"dear": "top_k", "cheap": "accepted"}
    cfg.filter.cost_weight = -1.0
    with pytest.raises(ConfigError, match="filter.cost_weight"):
        filter_stage.run(cfg)
