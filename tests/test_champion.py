"""Round 0: distill hands its SFT policy to nightly when it beats the base, on a real DuckDB file."""

from __future__ import annotations

import pytest

from pipeline import champion, db
from pipeline.config import load_config
from pipeline.policies import base_policy

SFT, NIGHTLY = "sft-000000000001", "sft-000000000002"


@pytest.fixture
def warehouse(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path / 'run'}"])
    con = db.connect(cfg.run.db_path)
    yield cfg, con, base_policy(cfg).policy_id
    con.close()


def _lift(con, eval_id: str, base_id: str, policy_id: str, value: float, lo: float, hi: float) -> None:
    db.write_rows(
        con,
        "evaluations",
        [
            {
                "eval_id": eval_id,
                "policy_id": policy_id,
                "base_policy_id": base_id,
                "metric": "lift",
                "value": value,
                "ci_low": lo,
                "ci_high": hi,
                "n_rooms": 5,
                "created_at": db.now(),
            },
        ],
    )


def _rounds(con) -> list[tuple]:
    return con.execute(
        "select round_id, champion_before, candidate_policy_id, promoted, decision from nightly_rounds"
    ).fetchall()


def test_a_lift_above_zero_makes_the_sft_policy_champion_once(warehouse):
    cfg, con, base_id = warehouse
    _lift(con, "eval-a", base_id, SFT, 0.19, 0.05, 0.34)
    assert champion.adopt_distilled(con, cfg, "eval-a") == {"decision": "promoted", "champion": SFT}
    assert champion.current(con, cfg) == SFT
    assert _rounds(con) == [("distill-eval-a", base_id, SFT, True, "promoted")]
    # a rerun of distill on the same evaluation: the champion is no longer the base, nothing is written
    assert champion.adopt_distilled(con, cfg, "eval-a")["decision"] == "left_champion"
    assert len(_rounds(con)) == 1


def test_an_interval_reaching_zero_keeps_the_base(warehouse):
    cfg, con, base_id = warehouse
    _lift(con, "eval-b", base_id, SFT, 0.10, -0.02, 0.21)
    assert champion.adopt_distilled(con, cfg, "eval-b") == {"decision": "kept_champion", "champion": base_id}
    assert champion.current(con, cfg) == base_id
    assert _rounds(con) == [("distill-eval-b", base_id, SFT, False, "kept_champion")]
    # the same evaluation again writes no second row
    champion.adopt_distilled(con, cfg, "eval-b")
    assert len(_rounds(con)) == 1


def test_the_best_of_several_winning_candidates_is_promoted(warehouse):
    cfg, con, base_id = warehouse
    _lift(con, "eval-c", base_id, SFT, 0.10, 0.01, 0.20)
    _lift(con, "eval-c", base_id, NIGHTLY, 0.25, 0.02, 0.40)
    assert champion.adopt_distilled(con, cfg, "eval-c")["champion"] == NIGHTLY


def test_a_champion_promoted_by_nightly_is_left_alone(warehouse):
    cfg, con, base_id = warehouse
    champion.current(con, cfg)
    champion.promote(con, NIGHTLY)
    _lift(con, "eval-d", base_id, SFT, 0.30, 0.20, 0.40)  # beats the base, not compared with NIGHTLY
    assert champion.adopt_distilled(con, cfg, "eval-d") == {"decision": "left_champion", "champion": NIGHTLY}
    assert champion.current(con, cfg) == NIGHTLY
    assert _rounds(con) == []


def test_an_evaluation_without_candidates_changes_nothing(warehouse):
    cfg, con, _ = warehouse
    assert champion.adopt_distilled(con, cfg, "eval-none") == {"decision": "no_candidate"}
    assert _rounds(con) == []


@pytest.mark.parametrize(
    ("lift", "expected"),
    [(None, False), ({"ci_low": None}, False), ({"ci_low": 0.0}, False), ({"ci_low": 0.001}, True)],
)
def test_the_promotion_rule_needs_the_whole_interval_above_zero(lift, expected):
    assert champion.beats(lift) is expected
