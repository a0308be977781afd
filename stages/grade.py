"""Stage `grade`: score every ungraded trajectory against its room's rubric.

    python -m pipeline --recipe tiny grade [--regrade] [grade.judges='[reference,llm]']

Per (trajectory, judge): one row per criterion in `grades` and one row of
recall, precision and headline in `memo_scores`, written in one transaction
and stamped with the grader version, so a killed run never leaves a
trajectory half graded. The `reference` judge is the deterministic one
(pipeline.grading.reference: reading budget, quotation, negation, claims);
the `llm` judge asks an OpenAI-compatible model for strict JSON verdicts on
the memo as the reference judge reads it (pipeline.grading.llm_judge) and
records criteria it could not grade as NULL, never as pass or fail.
`--regrade` (grade.regrade) also grades trajectories an older grader
version graded; the old rows stay and the views read each trajectory's
newest version. When both judges ran, the per-kind agreement (rate and
Cohen's kappa) is printed and returned.
"""

from __future__ import annotations

import asyncio
import sys

import duckdb
from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.reference import GRADER_VERSION, MemoGrade, ReferenceGrader
from pipeline.rooms import store
from pipeline.rooms.model import Criterion


def ungraded(
    con: duckdb.DuckDBPyConnection, judge: str, version: int, regrade: bool = False
) -> list[tuple[str, str, str | None]]:
    """(trajectory_id, room_id, memo) of trajectories ``judge`` has not graded.

    Without ``regrade``, a trajectory graded by any version counts as graded;
    with it, only grades from ``version`` do (older rows stay).
    """
    return con.execute(
        """
        select t.trajectory_id, t.room_id, t.memo
        from trajectories as t
        where not exists (
            select 1 from grades as g
            where g.trajectory_id = t.trajectory_id and g.judge = ? and (not ? or g.grader_version = ?)
        )
        order by t.room_id, t.trajectory_id
        """,
        [judge, regrade, version],
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
        "grader_version": GRADER_VERSION,
    }


def _score_row(tid: str, judge: str, g: MemoGrade) -> dict:
    return {"trajectory_id": tid, "judge": judge, **g.summary(), "graded_at": db.now()}


class _Graders:
    """One ReferenceGrader at a time: trajectories arrive sorted by room, and a grader holds its room's text."""

    def __init__(self, con: duckdb.DuckDBPyConnection, budget_words: int) -> None:
        self.con, self.budget_words, self.room_id, self.grader = con, budget_words, None, None

    def __call__(self, room_id: str) -> ReferenceGrader:
        if room_id != self.room_id:
            room = store.load_room(self.con, room_id, with_text=True)
            self.grader = ReferenceGrader(room, budget_words=self.budget_words or None)
            self.room_id = room_id
        return self.grader


def grade_reference(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, batch: int = 200) -> int:
    todo = ungraded(con, "reference", GRADER_VERSION, cfg.grade.regrade)
    graders = _Graders(con, cfg.grade.budget_words)
    done = 0
    grades: list[dict] = []
    scores: list[dict] = []
    for tid, room_id, memo in tqdm(todo, desc="grade reference", unit="traj", disable=not todo):
        grader = graders(room_id)
        g = grader.grade(memo or "")
        by_id = {c.criterion_id: c for c in grader.criteria}
        grades += [
            _grade_row(tid, by_id[cid], "reference", passed, reason) for cid, passed, reason in g.verdicts
        ]
        scores.append(_score_row(tid, "reference", g))
        done += 1
        if done % batch == 0:  # whole trajectories per transaction
            db.write_many(con, {"grades": grades, "memo_scores": scores})
            grades, scores = [], []
    db.write_many(con, {"grades": grades, "memo_scores": scores})
    return done


def grade_llm(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> int:
    """Grade with the LLM judge under the reference judge's reading rules.

    The judge is shown the memo as the reference judge reads it (reading
    budget applied, text copied from the room cut out), so pasted source
    cannot pass a criterion; its verdicts give recall, and precision comes
    from the same claim check as the reference judge's (the LLM judge never
    sees the room's labels).
    """
    from pipeline.grading.llm_judge import JudgeCache, judge_memo
    from pipeline.llm.base import make_backend

    judge_cfg = cfg.models.judge
    name = f"llm:{judge_cfg.model or judge_cfg.kind}"
    todo = ungraded(con, name, GRADER_VERSION, cfg.grade.regrade)
    if not todo:
        return 0
    graders = _Graders(con, cfg.grade.budget_words)
    # reading needs the room's text, so it runs room by room before the concurrent requests
    read = {tid: graders(room_id).readable(memo or "") for tid, room_id, memo in todo}
    crit: dict[str, list[Criterion]] = {}
    cache = JudgeCache(con)
    verdicts_of: dict[str, list] = {}

    async def go() -> None:
        backend = make_backend(judge_cfg)
        gate = asyncio.Semaphore(max(1, judge_cfg.concurrency))
        bar = tqdm(total=len(todo), desc="grade llm", unit="traj")

        async def one(tid: str, room_id: str) -> None:
            async with gate:
                verdicts_of[tid] = await judge_memo(
                    backend,
                    read[tid],
                    _criteria(con, crit, room_id),
                    judge_name=name,
                    criteria_per_call=cfg.grade.criteria_per_call,
                    max_attempts=cfg.grade.max_attempts,
                    cache=cache,
                )
            bar.update(1)

        try:
            await asyncio.gather(*(one(tid, room_id) for tid, room_id, _ in todo))
        finally:
            bar.close()
            await backend.aclose()

    asyncio.run(go())
    for tid, room_id, memo in todo:  # sorted by room: each room's text is loaded once
        verdicts = verdicts_of[tid]
        by_id = {c.criterion_id: c for c in _criteria(con, crit, room_id)}
        rows = [_grade_row(tid, by_id[cid], name, passed, reason) for cid, passed, reason in verdicts]
        score = graders(room_id).grade_with(memo or "", verdicts)
        db.write_many(con, {"grades": rows, "memo_scores": [_score_row(tid, name, score)]})
    return len(todo)


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    unknown = set(cfg.grade.judges) - {"reference", "llm"}
    if unknown:
        raise ValueError(f"grade.judges: unknown judge(s) {sorted(unknown)} (reference | llm)")
    with db.stage_run(con, "grade", cfg.hash("grade", "models")) as counts:
        if "reference" in cfg.grade.judges:
            counts["graded_reference"] = grade_reference(con, cfg)
            stale = len(ungraded(con, "reference", GRADER_VERSION, regrade=True))
            if stale:
                counts["graded_by_older_version"] = stale
                print(
                    f"{stale} trajectories keep scores from an older grader version "
                    f"(current: {GRADER_VERSION}); `grade --regrade` grades them again",
                    file=sys.stderr,
                )
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
