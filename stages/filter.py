"""Stage `filter`: rejection-sample graded training trajectories.

    python -m pipeline --recipe tiny filter [filter.min_score=0.4 filter.min_coverage=0.8]

The rules are SQL (sql/filters/select.sql) parameterised from the recipe's
`filter` section: finished by submit(), minimum rubric pass rate (absolute,
optionally relative to the room's mean), minimum coverage, trap failures,
root conversation length, policy lineage, duplicates (same code turns on
the same room) and top-k per room. Every training trajectory gets a row in
`selections` with the first rule that rejected it, or 'accepted'. Prints the funnel
(sampled → finished → score → coverage → accepted), overall and per room.
Zero accepted trajectories is an error (exit 1), never an empty dataset.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig


class NoAcceptedTrajectories(RuntimeError):
    user_facing = True


def params(cfg: PipelineConfig) -> dict:
    f = cfg.filter
    return {
        "require_submit": f.require_submit,
        "min_score": f.min_score,
        "min_relative": f.min_relative_to_room_mean,
        "min_coverage": f.min_coverage,
        "max_trap_failures": f.max_trap_failures,
        "max_root_chars": f.max_root_chars,
        "policy_lineage": f.policy_lineage,
        "top_k": f.top_k_per_room,
    }


def decide(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> list[tuple[str, str]]:
    return con.execute(db.read_sql("filters/select.sql"), params(cfg)).fetchall()


def funnel_table(con: duckdb.DuckDBPyConnection, selection_id: str) -> str:
    rows = con.execute(
        "select room_id, sampled, finished, passed_score, passed_coverage, accepted from rejection_funnel "
        "where selection_id = ? order by room_id = '' desc, room_id",
        [selection_id],
    ).fetchall()
    head = f"{'room':24s} {'sampled':>8s} {'finished':>9s} {'score':>6s} {'coverage':>9s} {'accepted':>9s}"
    lines = [head]
    for room, *n in rows:
        lines.append(f"{room or 'ALL':24s} {n[0]:8d} {n[1]:9d} {n[2]:6d} {n[3]:9d} {n[4]:9d}")
    return "\n".join(lines)


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    with db.stage_run(con, "filter", cfg.hash("filter")) as counts:
        decisions = decide(con, cfg)
        if not decisions:
            raise NoAcceptedTrajectories(
                "no graded training trajectories to filter: run sample and grade first"
            )
        p = dataclasses.asdict(cfg.filter)
        key = json.dumps({"params": p, "decisions": decisions}, sort_keys=True)
        selection_id = "sel-" + hashlib.sha256(key.encode()).hexdigest()[:12]
        exists = con.execute(
            "select count(*) from selections where selection_id = ?", [selection_id]
        ).fetchone()[0]
        if not exists:
            now = db.now()
            db.write_many(
                con,
                {
                    "selections": [
                        {
                            "selection_id": selection_id,
                            "trajectory_id": t,
                            "accepted": r == "accepted",
                            "reason": r,
                            "params": p,
                            "created_at": now,
                        }
                        for t, r in decisions
                    ]
                },
            )
        reasons: dict[str, int] = {}
        for _, r in decisions:
            reasons[r] = reasons.get(r, 0) + 1
        counts.update(
            selection_id=selection_id,
            reused=bool(exists),
            reasons=reasons,
            accepted=reasons.get("accepted", 0),
            considered=len(decisions),
        )
        print(funnel_table(con, selection_id))
        if not reasons.get("accepted"):
            raise NoAcceptedTrajectories(
                f"0 of {len(decisions)} trajectories accepted by the filter (rejections: {reasons}); "
                "sample more (sample.k), or loosen filter.min_score / filter.min_coverage"
            )
    con.close()
    return counts
