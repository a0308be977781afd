"""The report's reads from the warehouse: tables as they are, figures from the views.

Every mean, rate and correlation the report shows per policy comes from a
view (`policy_summary`, `room_policy_summary`, `rejection_funnel`) or from
`evaluations`, so the report shows the numbers evaluate and the queries
see; nothing here recomputes them.
"""

from __future__ import annotations

import math

import duckdb

from pipeline import db, lineage

# Correlations of policy_summary; DuckDB's corr() is NaN where pipeline.stats.pearson says undefined (None).
_CORRELATIONS = ("calls_size_corr", "calls_tokens_corr")


def policy_labels(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Short readable names: 'base' for adapter-free policies, 'SFT' / 'RL' for trained ones (with the id when ambiguous)."""
    rows = db.fetch_dicts(
        con,
        "select policy_id, adapter, harness, prompt, train_id from policies order by created_at, policy_id",
    )
    bases = [r for r in rows if r["adapter"] is None]
    rl = [r for r in rows if (r["train_id"] or "").startswith("rl-")]
    sfts = [r for r in rows if r["adapter"] is not None and r not in rl]
    labels = {}
    for r in bases:
        labels[r["policy_id"]] = (
            "base" if len(bases) == 1 else f"base {r['harness']}/{r['prompt']} ({r['policy_id'][:8]})"
        )
    for i, r in enumerate(sfts, start=1):
        labels[r["policy_id"]] = "SFT" if len(sfts) == 1 else f"SFT {i} ({r['policy_id'][:8]})"
    # GRPO: the trained adapter, and the per-step adapters that sampled its rollouts (steps/step-<s>).
    finals = [r for r in rl if "/steps/step-" not in (r["adapter"] or "")]
    for i, r in enumerate(finals, start=1):
        labels[r["policy_id"]] = "RL" if len(finals) == 1 else f"RL {i} ({r['policy_id'][:10]})"
    for r in rl:
        if r not in finals:
            labels[r["policy_id"]] = f"RL step {r['adapter'].rsplit('step-', 1)[1]} ({r['train_id']})"
    return labels


def latest_evaluation(con: duckdb.DuckDBPyConnection) -> tuple[str | None, list[dict], int]:
    """(eval_id, its rows, number of evaluations in the warehouse) for the newest evaluate run's evaluation."""
    evals = con.execute(
        "select eval_id from evaluations group by eval_id order by max(created_at) desc, eval_id desc"
    ).fetchall()
    if not evals:
        return None, [], 0
    made = lineage.newest_output(con, "evaluate", "evaluation")
    eval_id = made.id if made else evals[0][0]  # a warehouse from before lineage: the newest rows
    rows = db.fetch_dicts(
        con, "select * from evaluations where eval_id = ? order by policy_id, metric", [eval_id]
    )
    return eval_id, rows, len(evals)


def trajectory_scores(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """One row per trajectory (the plots' points)."""
    return db.fetch_dicts(con, "select * from trajectory_scores order by policy_id, room_id, trajectory_id")


def policy_summaries(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """policy_summary by purpose, then policy; an undefined correlation is None."""
    rows = db.fetch_dicts(con, "select * from policy_summary order by purpose, policy_id")
    for r in rows:
        for col in _CORRELATIONS:
            v = r.get(col)
            if v is not None and not math.isfinite(v):
                r[col] = None
    return rows


def room_scores(con: duckdb.DuckDBPyConnection, purpose: str) -> dict[str, dict[str, float]]:
    """policy_id -> room_id -> mean headline score, for rooms where the policy has a score."""
    out: dict[str, dict[str, float]] = {}
    for pid, room, score in con.execute(
        "select policy_id, room_id, score from room_policy_summary where purpose = ? and score is not null",
        [purpose],
    ).fetchall():
        out.setdefault(pid, {})[room] = float(score)
    return out


def latest_selection(con: duckdb.DuckDBPyConnection) -> tuple[str, object] | None:
    """(selection_id, params) of the newest filter run's selection, or None before the filter stage ran."""
    made = lineage.newest_output(con, "filter", "selection")
    row = con.execute(
        "select selection_id, any_value(params) as params from selections "
        "where selection_id = $id or $id is null "
        "group by selection_id order by max(created_at) desc, selection_id desc limit 1",
        {"id": made.id if made else None},
    ).fetchone()
    return (row[0], row[1]) if row else None


def funnel_rows(con: duckdb.DuckDBPyConnection, selection_id: str) -> list[dict]:
    """rejection_funnel of one selection: the overall row (room_id '') first, then per room."""
    return db.fetch_dicts(
        con,
        "select * from rejection_funnel where selection_id = ? order by room_id = '' desc, room_id",
        [selection_id],
    )


def train_runs(con: duckdb.DuckDBPyConnection) -> list[dict]:
    return db.fetch_dicts(con, "select * from train_runs order by started_at, train_id")


def train_logs(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    """train_id -> its log rows by step."""
    by: dict[str, list[dict]] = {}
    for r in db.fetch_dicts(con, "select * from train_logs order by train_id, step"):
        by.setdefault(r["train_id"], []).append(r)
    return by


def nightly_rounds(con: duckdb.DuckDBPyConnection) -> list[dict]:
    return db.fetch_dicts(con, "select * from nightly_rounds order by started_at, round_id")


def stage_runs(con: duckdb.DuckDBPyConnection) -> list[dict]:
    return db.fetch_dicts(con, "select * from stage_runs order by started_at, run_id")


def sandbox_levels(con: duckdb.DuckDBPyConnection) -> str:
    """'bwrap+seccomp: 30, python: 2': the kernel layer each trajectory's REPL ran under."""
    rows = con.execute(
        "select coalesce(sandbox_level, 'not recorded'), count(*) from trajectories "
        "where harness = 'rlm' group by 1 order by 2 desc, 1"
    ).fetchall()
    return ", ".join(f"{level}: {n}" for level, n in rows) or "no trajectories"


def room_policy_rows(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """room_policy_summary: mean score and cost per (room, policy, purpose)."""
    return db.fetch_dicts(con, "select * from room_policy_summary order by policy_id, purpose, room_id")


def model_prices(con: duckdb.DuckDBPyConnection) -> list[dict]:
    return db.fetch_dicts(con, "select * from model_prices order by role, model")


def rl_steps(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict]]:
    """rl_id -> its steps (the rl_step_summary mart), in order."""
    by: dict[str, list[dict]] = {}
    for r in db.fetch_dicts(con, "select * from rl_step_summary order by rl_id, step"):
        by.setdefault(r["rl_id"], []).append(r)
    return by


def rl_rooms(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """rl_id -> the rooms its rollouts were drawn from."""
    by: dict[str, list[str]] = {}
    for rl_id, room in con.execute("select distinct rl_id, room_id from rl_rollouts order by all").fetchall():
        by.setdefault(rl_id, []).append(room)
    return by
