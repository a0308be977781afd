"""The champion rule and the rounds it records (distill and nightly alike), on a real DuckDB file."""

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


def _lift(value: float, lo: float, hi: float, n_rooms: int = 5) -> dict:
    return {"metric": "lift", "value": value, "ci_low": lo, "ci_high": hi, "n_rooms": n_rooms}


def _rounds(con) -> list[tuple]:
    return con.execute(
        "select champion_before, candidate_policy_id, promoted, decision from nightly_rounds order by started_at"
    ).fetchall()


def _round(con, cfg, start: str, cand: str, lift: dict | None, nothing_new: bool = False, kind="distill"):
    round_id = champion.open_round(con, kind, start)
    assert round_id.startswith(f"{kind}-")
    return champion.close_round(con, cfg, round_id, start, cand, lift, nothing_new)


def test_a_lift_above_zero_makes_the_candidate_champion(warehouse):
    cfg, con, base_id = warehouse
    assert _round(con, cfg, base_id, SFT, _lift(0.19, 0.05, 0.34)) == "promoted"
    assert champion.current(con, cfg) == SFT
    assert _rounds(con) == [(base_id, SFT, True, "promoted")]


def test_an_interval_reaching_zero_keeps_the_champion(warehouse):
    cfg, con, base_id = warehouse
    assert _round(con, cfg, base_id, SFT, _lift(0.10, -0.02, 0.21)) == "kept_champion"
    assert champion.current(con, cfg) == base_id
    assert _rounds(con) == [(base_id, SFT, False, "kept_champion")]


def test_a_round_from_an_old_champion_leaves_the_new_one(warehouse):
    cfg, con, base_id = warehouse
    champion.current(con, cfg)
    champion.promote(con, NIGHTLY)
    # distill compared SFT with the base, not with NIGHTLY: a win over the base promotes nothing
    assert _round(con, cfg, base_id, SFT, _lift(0.30, 0.20, 0.40)) == "left_champion"
    assert champion.current(con, cfg) == NIGHTLY
    assert _rounds(con) == [(base_id, SFT, False, "left_champion")]


def test_nothing_new_promotes_nothing_even_when_the_lift_wins(warehouse):
    cfg, con, base_id = warehouse
    assert _round(con, cfg, base_id, SFT, _lift(0.30, 0.20, 0.40), nothing_new=True, kind="nightly") == (
        "nothing_to_do"
    )
    assert champion.current(con, cfg) == base_id


def test_a_failed_round_is_recorded_as_failed(warehouse):
    cfg, con, base_id = warehouse
    round_id = champion.open_round(con, "nightly", base_id)
    assert con.execute("select decision from nightly_rounds").fetchone()[0] == "running"
    champion.fail_round(con, round_id)
    assert con.execute("select decision, ended_at is not null from nightly_rounds").fetchone() == (
        "failed",
        True,
    )


@pytest.mark.parametrize(
    ("lift", "expected"),
    [
        (None, False),
        ({"ci_low": None, "n_rooms": 5}, False),
        ({"ci_low": 0.0, "n_rooms": 5}, False),
        ({"ci_low": 0.001, "n_rooms": 5}, True),
        ({"ci_low": 0.001, "n_rooms": 2}, True),
        # one room: every bootstrap resample is that room, a zero-width "interval"
        ({"ci_low": 0.5, "n_rooms": 1}, False),
        ({"ci_low": 0.5}, False),
    ],
)
def test_the_promotion_rule_needs_the_whole_interval_above_zero_over_two_rooms(lift, expected):
    assert champion.beats(lift) is expected


def test_a_one_room_lift_keeps_the_champion(warehouse):
    cfg, con, base_id = warehouse
    assert _round(con, cfg, base_id, SFT, _lift(0.40, 0.40, 0.40, n_rooms=1)) == "kept_champion"
    assert champion.current(con, cfg) == base_id
