"""calibrate: the champion rule against itself on stored held-out episodes (A/A), and a known-worse policy."""

from __future__ import annotations

import contextlib
import io
import random

import numpy as np

from pipeline import db, evaluation
from pipeline.calibration import aa_calibration, episode_scores, split_pairs
from pipeline.cli import main
from pipeline.config import load_config
from pipeline.grading.oracle import evidence_memo
from pipeline.rooms import store
from tests.grading.test_agreement import _trajectory


def test_a_policy_against_itself_is_rarely_promoted():
    rng = np.random.default_rng(0)
    scores = {
        f"r{i}": [(float(x), "s0") for x in np.clip(rng.normal(0.5 + 0.1 * rng.normal(), 0.2, 8), 0, 1)]
        for i in range(20)
    }
    result = aa_calibration(scores, "p", min_effect=0.02, trials=400)
    assert result.rate <= 0.05 and result.n_rooms == 20 and result.pairs_per_room == 4
    # a rule with no bar at all promotes every split: the rate measures the rule, it is not a constant
    loose = aa_calibration(scores, "p", min_effect=-1.0, trials=100)
    assert loose.rate == 1.0


def test_pairs_are_drawn_within_a_session_before_across():
    """Two sessions 1.0 apart: a split pairs episodes of one session (differences near 0) while it can;
    only the odd episode out of each session is paired across (a difference near 1)."""
    rng = np.random.default_rng(1)
    episodes = [(0.0 + 0.01 * i, "a") for i in range(5)] + [(1.0 + 0.01 * i, "b") for i in range(3)]
    for _ in range(20):
        diffs = split_pairs(episodes, rng)
        assert len(diffs) == 4
        assert sum(abs(d) > 0.5 for d in diffs) == 1  # the leftovers of a (1 of 5) and b (1 of 3)


def test_session_effects_reach_the_a_a_rate():
    """Each room's episodes in two sessions whose effect differs by room: pairs across sessions carry
    it, so a rule calibrated on them is tested against it; the rate stays bounded by the rule."""
    rng = np.random.default_rng(2)
    scores = {}
    for i in range(20):
        shift = rng.normal(0, 0.15)
        scores[f"r{i}"] = [(float(rng.normal(0.5, 0.1)), "a"), (float(rng.normal(0.5 + shift, 0.1)), "b")]
    result = aa_calibration(scores, "p", min_effect=0.02, trials=300)
    assert result.n_sessions == 2 and result.pairs_per_room == 1 and result.rate <= 0.05


def _eval_rows(room, policy: str, memos: list[str]) -> list[dict]:
    rows = []
    for i, memo in enumerate(memos):
        r = _trajectory(f"{policy}-{room.name}-{i}", room.room_id)
        r.update(policy_id=policy, sample_index=i, purpose="eval", memo=memo)
        rows.append(r)
    return rows


def test_calibrate_on_a_real_warehouse_and_a_known_worse_policy_is_found_worse(tmp_path):
    """A real DuckDB file: eight held-out episodes per room of a policy whose memos vary (the oracle cut
    short at random), graded by the reference judge; calibrate reports its A/A rate at or under 5%, and a
    policy that submits empty memos on the same rooms and seeds has a lift whose interval lies below zero."""
    from stages import rooms as rooms_stage

    run = tmp_path / "run"
    cfg = load_config("tiny", [f"run.dir={run}", "rooms.n_rooms=6", "rooms.heldout_fraction=1.0"])
    rooms_stage.run(cfg)
    con = db.connect(cfg.run.db_path)
    rng = random.Random(0)
    try:
        names = evaluation.heldout_rooms(con)
        assert len(names) >= 4
        rows = []
        for name in names:
            room = store.load_room(con, name, with_text=True)
            paras = evidence_memo(room).split("\n\n")
            good = ["\n\n".join(paras[: rng.randint(2, len(paras))]) for _ in range(8)]
            rows += _eval_rows(room, "good", good) + _eval_rows(room, "worse", [""] * 8)
        db.write_many(con, {"trajectories": rows})
        members = [
            {
                "eval_id": "eval-test",
                "trajectory_id": r["trajectory_id"],
                "policy_id": r["policy_id"],
                "room_id": r["room_id"],
                "sample_index": r["sample_index"],
                "block": 0,
                "block_position": 0,
                "session_id": None,
            }
            for r in rows
        ]
        db.write_rows(con, "eval_trajectories", members)
        from pipeline import steps

        steps.grade(con, cfg)
        pairs = evaluation.paired_differences(con, "eval-test", "worse", "good")
        assert len(pairs) == len(names) and all(len(v) == 8 for v in pairs.values())
        from pipeline.stats import cluster_paired_ci

        assert cluster_paired_ci(pairs)["hi"] < 0  # the known-worse policy is found worse
        assert len(episode_scores(con, "good", names)) == len(names)
    finally:
        con.close()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["calibrate", "--policy", "good", "--trials", "200", f"run.dir={run}"])
    assert code == 0, err.getvalue()
    assert "A/A: good against itself" in out.getvalue() and "promoted" in out.getvalue()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err := io.StringIO()):
        assert main(["calibrate", f"run.dir={run}"]) == 1  # no champion yet: a one-line error
    assert "no champion yet" in err.getvalue()
