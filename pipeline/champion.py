"""The champion: the policy nightly rounds sample from and try to beat.

It is the recipe's base policy until a candidate wins, and a candidate wins
only when its paired held-out lift over the champion has a 95% interval
above zero. ``make distill`` is round 0 under the same rule: when the
champion is still the base policy its evaluation was paired with, the SFT
policy that beats it becomes the champion, so the first nightly round
samples the distilled policy instead of retraining distill's own selection.
Every decision is a row of ``nightly_rounds``; distill's round id starts
with ``distill-``.
"""

from __future__ import annotations

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


def beats(lift: dict | None) -> bool:
    """The promotion rule: the paired lift's 95% interval lies above zero."""
    return bool(lift and lift.get("ci_low") is not None and lift["ci_low"] > 0)


def adopt_distilled(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, eval_id: str) -> dict:
    """Round 0: promote the best candidate of distill's evaluation if it beats the base.

    Leaves a champion that a nightly round promoted alone (distill compared
    its candidates with the base, not with that champion). Idempotent: a
    rerun of distill on the same evaluation writes no second row.
    """
    lifts = db.fetch_dicts(
        con,
        "select policy_id, base_policy_id, value, ci_low, ci_high from evaluations "
        "where eval_id = ? and metric = 'lift' order by value desc, policy_id",
        [eval_id],
    )
    if not lifts:
        return {"decision": "no_candidate"}
    base_id = lifts[0]["base_policy_id"]
    champ_id = current(con, cfg)
    if champ_id != base_id:
        return {"decision": "left_champion", "champion": champ_id}
    winners = [r for r in lifts if beats(r)]
    best = winners[0] if winners else lifts[0]
    decision = "promoted" if winners else "kept_champion"
    now = db.now()
    with db.transaction(con):
        con.execute(
            "insert into nightly_rounds (round_id, champion_before, candidate_policy_id, promoted, lift, "
            "lift_ci_low, lift_ci_high, decision, started_at, ended_at) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict do nothing",
            [
                f"distill-{eval_id}",
                base_id,
                best["policy_id"],
                bool(winners),
                best["value"],
                best["ci_low"],
                best["ci_high"],
                decision,
                now,
                now,
            ],
        )
        if winners:
            promote(con, best["policy_id"])
    return {"decision": decision, "champion": best["policy_id"] if winners else base_id}
