"""Grade the warehouse's ungraded trajectories with the reference judge or an LLM judge.

Both judges write through pipeline.grading.grade_rows and stamp the grader
version; a trajectory's rows for one judge are written in one transaction,
so a killed run never leaves it half graded. The LLM judge is shown the memo
as the reference judge reads it and its scores take precision from the
reference judge's claim check (it never sees the room's labels).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import duckdb
from tqdm import tqdm

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.grade_rows import Verdict, grade_rows, score_row
from pipeline.grading.llm_judge import JudgeCache, judge_memo
from pipeline.grading.reference import GRADER_VERSION, ReferenceGrader
from pipeline.llm.base import make_backend
from pipeline.rooms import store
from pipeline.rooms.model import Criterion

JUDGES = ("reference", "llm")


def check_judges(judges: Iterable[str]) -> None:
    """Raise ValueError naming any judge that is neither ``reference`` nor ``llm``."""
    unknown = set(judges) - set(JUDGES)
    if unknown:
        raise ValueError(f"grade.judges: unknown judge(s) {sorted(unknown)} (reference | llm)")


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


def graded_by_older_version(con: duckdb.DuckDBPyConnection) -> int:
    """Trajectories whose reference grades all come from an older grader version."""
    return len(ungraded(con, "reference", GRADER_VERSION, regrade=True))


class RoomGraders:
    """One ReferenceGrader at a time: trajectories arrive sorted by room, and a grader holds its room's text."""

    def __init__(self, con: duckdb.DuckDBPyConnection, budget_words: int) -> None:
        self.con, self.budget_words = con, budget_words
        self.room_id: str | None = None
        self.grader: ReferenceGrader | None = None

    def __call__(self, room_id: str) -> ReferenceGrader:
        if self.grader is None or room_id != self.room_id:
            room = store.load_room(self.con, room_id, with_text=True)
            self.grader = ReferenceGrader(room, budget_words=self.budget_words or None)
            self.room_id = room_id
        return self.grader


def grade_reference(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, batch: int = 200, only: set[str] | None = None
) -> int:
    """Grade every trajectory the reference judge has not graded (``only``: of these ids); the number graded."""
    todo = ungraded(con, "reference", GRADER_VERSION, cfg.grade.regrade)
    if only is not None:  # RL grades each step's rollouts as they arrive, not the whole backlog
        todo = [row for row in todo if row[0] in only]
    graders = RoomGraders(con, cfg.grade.budget_words)
    done = 0
    grades: list[dict] = []
    scores: list[dict] = []
    for tid, room_id, memo in tqdm(todo, desc="grade reference", unit="traj", disable=not todo):
        grader = graders(room_id)
        g = grader.grade(memo or "")
        grades += grade_rows(tid, "reference", g.verdicts, {c.criterion_id: c for c in grader.criteria})
        scores.append(score_row(tid, "reference", g))
        done += 1
        if done % batch == 0:  # whole trajectories per transaction
            db.write_many(con, {"grades": grades, "memo_scores": scores})
            grades, scores = [], []
    db.write_many(con, {"grades": grades, "memo_scores": scores})
    return done


def llm_judge_name(cfg: PipelineConfig) -> str:
    """The `grades.judge` value of the configured LLM judge: ``llm:<model>``."""
    judge_cfg = cfg.models.judge
    return f"llm:{judge_cfg.model or judge_cfg.kind}"


def _criteria(
    con: duckdb.DuckDBPyConnection, cache: dict[str, list[Criterion]], room_id: str
) -> list[Criterion]:
    if room_id not in cache:
        cache[room_id] = store.load_room(con, room_id, with_text=False).criteria
    return cache[room_id]


def grade_llm(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> int:
    """Grade with the LLM judge under the reference judge's reading rules; the number graded.

    The judge is shown the memo as the reference judge reads it (reading
    budget applied, text copied from the room cut out), so pasted source
    cannot pass a criterion; its verdicts give recall, and precision comes
    from the same claim check as the reference judge's (the LLM judge never
    sees the room's labels).
    """
    judge_cfg = cfg.models.judge
    name = llm_judge_name(cfg)
    todo = ungraded(con, name, GRADER_VERSION, cfg.grade.regrade)
    if not todo:
        return 0
    graders = RoomGraders(con, cfg.grade.budget_words)
    # reading needs the room's text, so it runs room by room before the concurrent requests
    read = {tid: graders(room_id).readable(memo or "") for tid, room_id, memo in todo}
    crit: dict[str, list[Criterion]] = {}
    cache = JudgeCache(con)
    verdicts_of: dict[str, list[Verdict]] = {}

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
        score = graders(room_id).grade_with(memo or "", verdicts)
        db.write_many(
            con,
            {"grades": grade_rows(tid, name, verdicts, by_id), "memo_scores": [score_row(tid, name, score)]},
        )
    return len(todo)
