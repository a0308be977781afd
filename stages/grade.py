"""Stage `grade`: score every ungraded trajectory against its room's rubric.

    python -m pipeline --recipe tiny grade [grade.judges='[reference,llm]']

One row per (trajectory, criterion, judge) in `grades`. The `reference`
judge is the deterministic check beside the rubric
(pipeline.rooms.rubric.check_criterion); the `llm` judge asks an
OpenAI-compatible model for strict JSON verdicts (pipeline.grading.llm_judge)
and records criteria it could not grade as NULL, never as pass or fail.
A trajectory's grades from one judge are written in one transaction, so a
killed run never leaves a trajectory half graded. When both judges ran, the
per-kind agreement (rate and Cohen's kappa) is printed and returned.
"""

from __future__ import annotations

import asyncio

import duckdb
from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.rooms import store
from pipeline.rooms.model import Criterion


def ungraded(con: duckdb.DuckDBPyConnection, judge: str) -> list[tuple[str, str, str | None]]:
    """(trajectory_id, room_id, memo) of trajectories without grades from ``judge``."""
    return con.execute(
        """
        select t.trajectory_id, t.room_id, t.memo
        from trajectories as t
        where not exists (
            select 1 from grades as g where g.trajectory_id = t.trajectory_id and g.judge = ?
        )
        order by t.room_id, t.trajectory_id
        """,
        [judge],
    ).fetchall()


def _criteria(
    con: duckdb.DuckDBPyConnection, cache: dict[str, list[Criterion]], room_id: str
) -> list[Criterion]:
    if room_id not in cache:
        cache[room_id] = store.load_room(con, room_id, with_text=False).criteria
    return cache[room_id]


def _grade_row(tid: str, criterion: Criterion, judge: str, passed: bool | None, reason: str) -> dict:
    """A `grades` row; the criterion's kind and trap flag ride along so score views need no join."""
    return {
        "trajectory_id": tid,
        "criterion_id": criterion.criterion_id,
        "judge": judge,
        "passed": passed,
        "reason": reason,
        "graded_at": db.now(),
        "kind": criterion.kind,
        "is_trap": criterion.is_trap,
    }


def grade_reference(con: duckdb.DuckDBPyConnection, batch: int = 200) -> int:
    from pipeline.rooms.rubric import grade_memo

    todo = ungraded(con, "reference")
    crit: dict[str, list[Criterion]] = {}
    done = 0
    pending: list[dict] = []
    for tid, room_id, memo in tqdm(todo, desc="grade reference", unit="traj", disable=not todo):
        criteria = _criteria(con, crit, room_id)
        by_id = {c.criterion_id: c for c in criteria}
        for cid, passed, reason in grade_memo(criteria, memo or ""):
            pending.append(_grade_row(tid, by_id[cid], "reference", passed, reason))
        done += 1
        if done % batch == 0:  # whole trajectories per transaction
            db.write_many(con, {"grades": pending})
            pending = []
    db.write_many(con, {"grades": pending})
    return done


def grade_llm(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> int:
    from pipeline.grading.llm_judge import JudgeCache, judge_memo
    from pipeline.llm.base import make_backend

    judge_cfg = cfg.models.judge
    name = f"llm:{judge_cfg.model or judge_cfg.kind}"
    todo = ungraded(con, name)
    if not todo:
        return 0
    crit: dict[str, list[Criterion]] = {}
    cache = JudgeCache(con)

    async def go() -> int:
        backend = make_backend(judge_cfg)
        gate = asyncio.Semaphore(max(1, judge_cfg.concurrency))
        bar = tqdm(total=len(todo), desc="grade llm", unit="traj")

        async def one(tid: str, room_id: str, memo: str | None) -> None:
            async with gate:
                verdicts = await judge_memo(
                    backend,
                    memo or "",
                    _criteria(con, crit, room_id),
                    judge_name=name,
                    criteria_per_call=cfg.grade.criteria_per_call,
                    max_attempts=cfg.grade.max_attempts,
                    cache=cache,
                )
            by_id = {c.criterion_id: c for c in _criteria(con, crit, room_id)}
            rows = [_grade_row(tid, by_id[cid], name, passed, reason) for cid, passed, reason in verdicts]
            db.write_many(con, {"grades": rows})
            bar.update(1)

        try:
            await asyncio.gather(*(one(*row) for row in todo))
        finally:
            bar.close()
            await backend.aclose()
        return len(todo)

    return asyncio.run(go())


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path)
    unknown = set(cfg.grade.judges) - {"reference", "llm"}
    if unknown:
        raise ValueError(f"grade.judges: unknown judge(s) {sorted(unknown)} (reference | llm)")
    with db.stage_run(con, "grade", cfg.hash("grade", "models")) as counts:
        if "reference" in cfg.grade.judges:
            counts["graded_reference"] = grade_reference(con)
        if "llm" in cfg.grade.judges:
            counts["graded_llm"] = grade_llm(con, cfg)
        if {"reference", "llm"} <= set(cfg.grade.judges):
            from pipeline.grading.agreement import agreement_report

            report = agreement_report(con)
            counts["agreement"] = report
            for row in report:
                print(row)
    con.close()
    return counts
