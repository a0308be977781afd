"""Stage `evaluate`: base vs candidate policies on held-out rooms.

    python -m pipeline --recipe tiny evaluate [evaluate.k=4 evaluate.candidates='[sft-...]']

Samples ``evaluate.k`` trajectories per held-out room for the base policy and
each candidate (default: the newest trained policy) with the same prompt,
sampling parameters, subagents and judge, grades them with the reference
judge, and stores per policy: the mean headline score (F1 of recall and
precision, pipeline.grading.reference) with a 95% bootstrap interval over
rooms, the paired difference to the base with its interval, recall,
precision, pass rate by criterion kind, coverage, finished rate and the behaviour
metrics of the reference report — rows of `evaluations`. Held-out rooms are
only ever sampled with purpose 'eval', so they never reach training.
"""

from __future__ import annotations

import hashlib
import json

import duckdb

from pipeline import db, stats
from pipeline.config import PipelineConfig
from pipeline.policies import Policy, base_policy, load_policy, register_policy
from pipeline.rooms import store
from stages.grade import grade_reference
from stages.sample import sample_policy

BEHAVIOUR = [
    "subcalls",
    "delegated_chars",
    "memo_chars",
    "findings_carried",
    "calls_size_corr",
    "memo_before_delegation_done",
    "recall",
    "precision",
    "trap_failures",
]


def newest_candidate(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute(
        "select policy_id from policies where adapter is not null order by created_at desc, policy_id limit 1"
    ).fetchone()
    return row[0] if row else None


def room_values(
    con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str], column: str
) -> dict[str, float]:
    rows = con.execute(
        f"select room_id, {column} from room_policy_summary where policy_id = ? and purpose = 'eval' "
        "and list_contains(?, room_id)",
        [policy_id, rooms],
    ).fetchall()
    return {r: float(v) for r, v in rows if v is not None}


def evaluate_policies(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    base: Policy,
    candidates: list[Policy],
    rooms: list[str],
) -> tuple[str, list[dict]]:
    """Sample + grade on ``rooms``, then write and return the evaluation rows."""
    for p in [base, *candidates]:
        register_policy(con, p)
        sample_policy(con, cfg, p, rooms, cfg.evaluate.k, "eval", desc=f"evaluate {p.policy_id}")
    grade_reference(con, cfg)
    ids = [base.policy_id] + [c.policy_id for c in candidates]
    key = json.dumps({"policies": ids, "rooms": rooms, "k": cfg.evaluate.k, "boot": cfg.evaluate.bootstrap})
    eval_id = "eval-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    base_rates = room_values(con, base.policy_id, rooms, "score")
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
    for pid in ids:
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
        if pid != base.policy_id and rates and base_rates:
            diff, lo, hi, n = stats.paired_diff_ci(rates, base_rates, n_boot=B, seed=seed)
            add(pid, "lift", diff, lo, hi, n)
        for kind, rate in con.execute(
            "select kind, pass_rate from pass_rate_by_kind where policy_id = ? and purpose = 'eval'", [pid]
        ).fetchall():
            add(pid, f"pass_rate:{kind}", rate)
        summary = db.fetch_dicts(
            con, "select * from policy_summary where policy_id = ? and purpose = 'eval'", [pid]
        )
        for metric in BEHAVIOUR:
            if summary and summary[0].get(metric) is not None:
                add(pid, metric, float(summary[0][metric]))
    with db.transaction(con):
        con.execute("delete from evaluations where eval_id = ?", [eval_id])
        db.write_rows(con, "evaluations", rows)
    return eval_id, rows


def headline(rows: list[dict]) -> str:
    """One line per policy: headline score [CI], and lift [CI] for candidates."""
    out = []
    by = {}
    for r in rows:
        by.setdefault(r["policy_id"], {})[r["metric"]] = r
    for pid, m in by.items():
        pr = m.get("score")
        line = (
            f"{pid}: held-out score {pr['value']:.3f} [95% CI {pr['ci_low']:.3f}, {pr['ci_high']:.3f}]"
            if pr
            else pid
        )
        if "lift" in m:
            lf = m["lift"]
            line += f"; lift vs base {lf['value']:+.3f} [95% CI {lf['ci_low']:+.3f}, {lf['ci_high']:+.3f}]"
        out.append(line)
    return "\n".join(out)


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    with db.stage_run(con, "evaluate", cfg.hash("evaluate", "harness", "sampling", "models")) as counts:
        rooms = store.room_names(con, split="heldout")
        if not rooms:
            raise RuntimeError("no held-out rooms: generate rooms with rooms.heldout_fraction > 0")
        base = base_policy(cfg)
        cand_ids = cfg.evaluate.candidates or [c for c in [newest_candidate(con)] if c]
        candidates = [load_policy(con, c) for c in cand_ids]
        eval_id, rows = evaluate_policies(con, cfg, base, candidates, rooms)
        text = headline(rows)
        print(text)
        counts.update(eval_id=eval_id, rooms=len(rooms), policies=1 + len(candidates), headline=text)
    con.close()
    return counts
