"""Held-out evaluation withholds the lift when the root's server, not the policy, ended the episodes.

A real DuckDB warehouse (the report tests' fixture data: base and SFT on three held-out rooms,
two episodes each); sampling, grading and registering the policies are skipped: the rows are there.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline import champion, db, evaluation
from pipeline.config import load_config
from pipeline.metrics import by_policy, headline
from tests.stages.test_report import BASE, SFT, fill_warehouse


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    cfg = load_config("tiny", [f"run.dir={tmp_path / 'run'}", "evaluate.bootstrap=200"])
    con = db.connect(cfg.run.db_path)
    fill_warehouse(con)
    # the evaluation's trajectories are the fixture's held-out episodes, as one block in one session
    monkeypatch.setattr(evaluation, "sample_in_blocks", lambda con, *a, **k: _members(con))
    monkeypatch.setattr(evaluation, "grade_reference", lambda *a, **k: None)
    monkeypatch.setattr(evaluation, "register_policy", lambda *a, **k: None)  # the fixture registered them
    yield cfg, con
    con.close()


def _members(con) -> list[dict]:
    rows = con.execute(
        "select trajectory_id, policy_id, room_id, sample_index from trajectories where purpose = 'eval'"
    ).fetchall()
    keys = ("trajectory_id", "policy_id", "room_id", "sample_index")
    return [
        {**dict(zip(keys, r, strict=True)), "block": 0, "block_position": 0, "session_id": None} for r in rows
    ]


def _evaluate(cfg, con):
    rooms = evaluation.heldout_rooms(con)
    _, rows = evaluation.evaluate_policies(
        con, cfg, SimpleNamespace(policy_id=BASE), [SimpleNamespace(policy_id=SFT)], rooms
    )
    return by_policy(rows), rows


def _server_failed(con, trajectory_ids: list[str], *, root_tokens: int = 0) -> None:
    con.execute(
        "update trajectories set status = 'timeout', root_completion_tokens = ? where list_contains(?, trajectory_id)",
        [root_tokens, trajectory_ids],
    )


def test_a_clean_evaluation_reports_the_lift_and_no_serving_failures(warehouse):
    cfg, con = warehouse
    by, rows = _evaluate(cfg, con)
    assert by[SFT]["serving_failed_rate"]["value"] == 0.0 and by[BASE]["serving_failed_rate"]["value"] == 0.0
    assert "lift" in by[SFT] and "lift_withheld" not in by[SFT]
    assert "lift withheld" not in headline(rows)


def test_episodes_the_server_never_answered_withhold_the_lift_and_promote_nothing(warehouse):
    cfg, con = warehouse
    _server_failed(con, [f"t-eval-room-{r}-sft-{i}" for r in (3, 4) for i in (0, 1)])  # 4 of SFT's 6
    by, rows = _evaluate(cfg, con)
    assert by[SFT]["serving_failed_rate"]["value"] == pytest.approx(4 / 6)
    assert "lift" not in by[SFT] and by[SFT]["lift_withheld"]["value"] == pytest.approx(4 / 6)
    text = headline(rows)
    assert "lift withheld" in text and f"{SFT} 67%" in text and f"{BASE} 0%" in text
    stored = con.execute(
        "select metric from evaluations where eval_id = ? and policy_id = ? and metric like 'lift%'",
        [rows[0]["eval_id"], SFT],
    ).fetchall()
    assert stored == [("lift_withheld",)]

    start = champion.current(con, cfg)
    round_id = champion.open_round(con, "distill", start)
    decision = champion.close_round(con, cfg, round_id, start, SFT, None, False, withheld=True)
    assert decision == "lift_withheld" and champion.current(con, cfg) == start


def test_the_threshold_counts_only_episodes_without_a_root_token(warehouse):
    cfg, con = warehouse
    # A timeout after the root wrote 400 tokens is the policy's: it counts as a failed episode, not the server's.
    _server_failed(con, ["t-eval-room-3-sft-0", "t-eval-room-4-sft-0"], root_tokens=400)
    by, _ = _evaluate(cfg, con)
    assert by[SFT]["serving_failed_rate"]["value"] == 0.0 and "lift" in by[SFT]
    # One episode in six with no root token is above the default 5%; a 20% allowance lets it through.
    _server_failed(con, ["t-eval-room-5-base-1"])
    by, _ = _evaluate(cfg, con)
    assert by[BASE]["serving_failed_rate"]["value"] == pytest.approx(1 / 6) and "lift_withheld" in by[SFT]
    cfg.evaluate.max_serving_failed = 0.2
    by, _ = _evaluate(cfg, con)
    assert "lift" in by[SFT] and "lift_withheld" not in by[SFT]


def _program(con, trajectory_id: str, code: str, turn: int = 0) -> None:
    con.execute(
        "insert into turns (trajectory_id, turn_index, new_messages, completion, code, prompt_tokens, "
        "completion_tokens, started_s, ended_s) values (?, ?, '[]', ?, ?, 10, 10, 0, 1)",
        [trajectory_id, turn, f"```python\n{code}\n```", code],
    )


def test_the_distinct_programs_over_all_episodes_are_counted_and_printed(warehouse):
    cfg, con = warehouse
    eval_ids = [
        r[0] for r in con.execute("select trajectory_id from trajectories where purpose = 'eval'").fetchall()
    ]
    for tid in eval_ids:  # the base adapts its program to each room, the SFT writes one program everywhere
        room = tid.split("-")[3]
        _program(con, tid, f"print(room.docs('{room}'))" if "base" in tid else "print(len(documents))")
    _program(con, next(t for t in eval_ids if "base" in t), "x  =  1", turn=1)  # a second turn
    by, rows = _evaluate(cfg, con)
    n_base = sum("base" in t for t in eval_ids)
    assert by[SFT]["programs_overall"]["value"] == 1.0
    assert by[SFT]["programs_overall"]["n_rooms"] == len(eval_ids) - n_base
    assert by[BASE]["programs_overall"]["value"] == 4.0  # 3 rooms, and one episode that ran a second program
    assert f"1 distinct programs in its {len(eval_ids) - n_base} episodes" in headline(rows)


def test_the_share_of_the_subagent_budget_spent_is_a_behaviour_row(warehouse):
    cfg, con = warehouse
    by, _ = _evaluate(cfg, con)
    assert "budget_used" not in by[SFT]  # rows written before the budget was recorded have none
    con.execute(
        "update trajectories set subagent_budget_tokens = 4 * (sub_prompt_tokens + sub_completion_tokens) "
        "where purpose = 'eval' and sub_prompt_tokens + sub_completion_tokens > 0"
    )
    by, _ = _evaluate(cfg, con)
    assert by[SFT]["budget_used"]["value"] == pytest.approx(0.25)
