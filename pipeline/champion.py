"""The champion: the policy nightly rounds sample from and try to beat.

It is the recipe's base policy until a candidate wins, and a candidate wins
only when its paired held-out lift over the policy its round started from
(same rooms, same seeds) has a 95% interval whose lower end exceeds
``evaluate.min_effect``, measured over at least two held-out rooms.
``make distill`` is round 0 under the same rule (pipeline.round): it starts
from the base, so when the base is still the champion the SFT policy that
beats it becomes the champion, and the first nightly round samples the
distilled policy. Every round is a row of ``nightly_rounds``, written only
here; its id starts with the round's kind (``distill-`` or ``nightly-``).
"""

from __future__ import annotations

import math
import uuid

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.policies import base_policy, register_policy


def current(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> str:
    """The champion's policy id; the recipe's base policy when none was ever set."""
    row = con.execute("select policy_id from champion").fetchone()
    if row:
        return row[0]
    pid = register_policy(con, base_policy(cfg))
    con.execute("insert into champion (singleton, policy_id, updated_at) values (1, ?, ?)", [pid, db.now()])
    return pid


def promote(con: duckdb.DuckDBPyConnection, policy_id: str) -> None:
    con.execute("update champion set policy_id = ?, updated_at = ?", [policy_id, db.now()])


# The bootstrap resamples rooms: over one room every resample is that room, so the "interval" has
# zero width and one lucky episode on one room would promote (the tiny recipe did, a run in three).
MIN_LIFT_ROOMS = 2


def beats(lift: dict | None, min_effect: float = 0.0) -> bool:
    """The promotion rule: the paired lift's 95% interval, over at least two held-out rooms, lies above
    ``min_effect``."""
    return bool(
        lift
        and lift.get("ci_low") is not None
        and lift["ci_low"] > min_effect
        and (lift.get("n_rooms") or 0) >= MIN_LIFT_ROOMS
    )


def reason(lift: dict | None, mde: float | None, min_effect: float) -> str:
    """Why the rule promotes or not, in one line, with the design's minimum detectable effect beside it."""
    if not lift or lift.get("ci_low") is None:
        return "no paired lift to judge"
    if mde is None:
        power = ""
    elif math.isnan(mde):
        power = "; every pair scored the same, so no minimum detectable effect can be stated"
    else:
        power = f"; this design detects {mde:.3f} with 80% power"
    where = f"lift {lift['value']:+.3f} [95% CI {lift['ci_low']:+.3f}, {lift['ci_high']:+.3f}]"
    if (lift.get("n_rooms") or 0) < MIN_LIFT_ROOMS:
        return f"{where} over {lift.get('n_rooms') or 0} room(s): fewer than {MIN_LIFT_ROOMS}{power}"
    if lift["ci_low"] > min_effect:
        return f"{where}: its lower end is above the minimum effect {min_effect:.3f}{power}"
    return f"{where}: its lower end is not above the minimum effect {min_effect:.3f}{power}"


def open_round(con: duckdb.DuckDBPyConnection, kind: str, start_policy_id: str) -> str:
    """A ``nightly_rounds`` row for a round that starts from ``start_policy_id``; returns its id."""
    round_id = f"{kind}-{db.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"
    con.execute(
        "insert into nightly_rounds (round_id, champion_before, decision, started_at) values (?, ?, 'running', ?)",
        [round_id, start_policy_id, db.now()],
    )
    return round_id


def evaluated_against(con: duckdb.DuckDBPyConnection, policy_id: str, start_policy_id: str) -> bool:
    """Whether ``policy_id`` already has a lift over ``start_policy_id`` (before this round's evaluation)."""
    return bool(
        con.execute(
            "select count(*) from evaluations where policy_id = ? and base_policy_id = ? and metric = 'lift'",
            [policy_id, start_policy_id],
        ).fetchone()[0]
    )


def close_round(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    round_id: str,
    start_policy_id: str,
    candidate_id: str,
    lift: dict | None,
    nothing_new: bool,
    withheld: bool = False,
) -> str:
    """The round's decision, applied and recorded; returns it.

    ``promoted``: the candidate beats the policy the round started from, and
    that policy is still the champion. ``left_champion``: another round made
    a different champion meanwhile (distill compares with the base, not with
    a champion a nightly round promoted), so this round leaves it.
    ``nothing_to_do``: no new trajectories, the same selection and dataset,
    and the candidate was already evaluated. ``lift_withheld``: the
    evaluation could not compare the policies (pipeline.evaluation), so the
    champion stays and the round says why rather than reporting a lift.
    """
    champ = current(con, cfg)
    wins = beats(lift, cfg.evaluate.min_effect) and candidate_id != start_policy_id
    if nothing_new:
        decision = "nothing_to_do"
    elif withheld:
        decision = "lift_withheld"
    elif champ != start_policy_id:
        decision = "left_champion"
    else:
        decision = "promoted" if wins else "kept_champion"
    with db.transaction(con):
        if decision == "promoted":
            promote(con, candidate_id)
        con.execute(
            "update nightly_rounds set candidate_policy_id=?, promoted=?, lift=?, lift_ci_low=?, lift_ci_high=?, "
            "decision=?, ended_at=? where round_id=?",
            [
                candidate_id,
                decision == "promoted",
                lift and lift["value"],
                lift and lift["ci_low"],
                lift and lift["ci_high"],
                decision,
                db.now(),
                round_id,
            ],
        )
    return decision


def fail_round(con: duckdb.DuckDBPyConnection, round_id: str) -> None:
    con.execute(
        "update nightly_rounds set decision='failed', ended_at=? where round_id=?", [db.now(), round_id]
    )
