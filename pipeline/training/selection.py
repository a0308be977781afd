"""Selections: which graded training trajectories the rejection filter accepts, and why not the others.

The rules are SQL (sql/filters/select.sql) parameterised from the recipe's
``filter`` section. A selection is one decision per trajectory ('accepted' or
the first rule that rejected it) under one id derived from the parameters and
the decisions, so the same inputs find the selection they already wrote. The
dataset builder reads a selection back by id (or the newest one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import ConfigError, PipelineConfig
from pipeline.ids import content_hash
from pipeline.training.errors import FilterJudgeError, NoAcceptedTrajectories, NoSelectionError


@dataclass
class Selection:
    selection_id: str
    reused: bool  # the same parameters and decisions were already recorded
    reasons: dict[str, int]  # decision -> number of trajectories

    @property
    def accepted(self) -> int:
        return self.reasons.get("accepted", 0)

    @property
    def considered(self) -> int:
        return sum(self.reasons.values())

    def counts(self) -> dict[str, Any]:
        """What the filter stage records in stage_runs."""
        return {
            "selection_id": self.selection_id,
            "reused": self.reused,
            "reasons": self.reasons,
            "accepted": self.accepted,
            "considered": self.considered,
        }


def filter_judge(cfg: PipelineConfig) -> str:
    """The ``grades.judge`` value whose headline the filter reads (``filter.judge``)."""
    from pipeline.grading.grade_run import JUDGES, llm_judge_name

    judge = cfg.filter.judge
    if judge not in JUDGES:
        raise FilterJudgeError(f"filter.judge: unknown judge {judge!r} (reference | llm)")
    return llm_judge_name(cfg) if judge == "llm" else "reference"


def params(cfg: PipelineConfig) -> dict[str, Any]:
    """The SQL parameters of sql/filters/select.sql from the recipe's filter section."""
    f = cfg.filter
    if f.cost_weight < 0:
        raise ConfigError(f"filter.cost_weight ({f.cost_weight}) must be >= 0: it ranks cheaper work higher")
    return {
        "judge": filter_judge(cfg),
        "require_submit": f.require_submit,
        "min_score": f.min_score,
        "min_relative": f.min_relative_to_room_mean,
        "min_coverage": f.min_coverage,
        "max_trap_failures": f.max_trap_failures,
        "max_root_chars": f.max_root_chars,
        "policy_lineage": f.policy_lineage,
        "top_k": f.top_k_per_room,
        "cost_weight": f.cost_weight,
    }


def decide(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> list[tuple[str, str]]:
    """(trajectory_id, 'accepted' or the first rejecting rule) for every graded training trajectory."""
    return con.execute(db.read_sql("filters/select.sql"), params(cfg)).fetchall()


def selection_id_for(filter_params: dict[str, Any], decisions: list[tuple[str, str]]) -> str:
    return "sel-" + content_hash({"params": filter_params, "decisions": decisions}, length=12)


def select(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig) -> Selection:
    """Apply the filter and record its decisions as a selection (once per distinct outcome)."""
    decisions = decide(con, cfg)
    if not decisions:
        raise NoAcceptedTrajectories(
            f"no training trajectories graded by {filter_judge(cfg)} (filter.judge={cfg.filter.judge}) to filter: "
            f"run sample, then grade with {cfg.filter.judge} in grade.judges"
        )
    p = dataclasses.asdict(cfg.filter)
    if not p["cost_weight"]:
        p.pop("cost_weight")  # off: the ids of selections made before the term existed stay as they were
    selection_id = selection_id_for(p, decisions)
    exists = con.execute("select count(*) from selections where selection_id = ?", [selection_id]).fetchone()[
        0
    ]
    if not exists:
        now = db.now()
        rows = [
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
        db.write_many(con, {"selections": rows})
    reasons: dict[str, int] = {}
    for _, r in decisions:
        reasons[r] = reasons.get(r, 0) + 1
    return Selection(selection_id=selection_id, reused=bool(exists), reasons=reasons)


def require_accepted(selection: Selection) -> None:
    """Zero accepted trajectories is an error, never an empty dataset."""
    if not selection.accepted:
        raise NoAcceptedTrajectories(
            f"0 of {selection.considered} trajectories accepted by the filter (rejections: {selection.reasons}); "
            "sample more (sample.k), or loosen filter.min_score / filter.min_coverage"
        )


def funnel_table(con: duckdb.DuckDBPyConnection, selection_id: str) -> str:
    """The rejection funnel (sampled -> finished -> score -> coverage -> accepted), overall and per room."""
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


def require_selection(con: duckdb.DuckDBPyConnection, selection_id: str) -> None:
    """A selection id the warehouse has, or a one-line error naming it."""
    n = con.execute("select count(*) from selections where selection_id = ?", [selection_id]).fetchone()[0]
    if not n:
        raise NoSelectionError(f"dataset.selection_id: no selection {selection_id!r} in the warehouse")
