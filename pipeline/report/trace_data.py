"""What one trajectory page shows, read from the warehouse through sql/pages/*.sql.

Subagent calls are grouped per ``llm_batch`` the way the root issued them:
calls of one turn, in call order, belong to one batch while some earlier call
of it was still running when the next was issued (a batch waits only for a
free slot, never for all its calls; a new ``llm_batch`` or ``llm_query`` in
the same cell starts after the previous one returned). The warehouse keeps no
batch id, so two batches issued concurrently from threads would read as one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from pipeline import db
from pipeline.errors import UserError


@dataclass
class Batch:
    turn_index: int
    calls: list[dict]

    @property
    def prompt_tokens(self) -> int:
        return sum(c["prompt_tokens"] or 0 for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c["completion_tokens"] or 0 for c in self.calls)

    @property
    def seconds(self) -> float:
        """From the first call issued to the last returned."""
        return max(c["returned_s"] for c in self.calls) - min(c["issued_s"] for c in self.calls)

    @property
    def errors(self) -> int:
        return sum(1 for c in self.calls if c["error"])


@dataclass
class TraceView:
    row: dict  # sql/pages/trajectory_list.sql: scores, cost, room name, filter decision, memo
    policy: dict  # the policies row
    turns: list[dict]
    batches: dict[int, list[Batch]]  # turn index -> its batches in order
    grades: list[dict]  # sql/pages/trajectory_grades.sql
    coverage: list[dict]  # sql/pages/trajectory_coverage.sql, scope 'all' first per folder
    selection_id: str | None
    extra: dict = field(default_factory=dict)


def group_batches(calls: list[dict]) -> dict[int, list[Batch]]:
    """Turn index -> its llm_batch groups (see the module docstring)."""
    out: dict[int, list[Batch]] = {}
    current: Batch | None = None
    latest_return = 0.0
    for c in sorted(calls, key=lambda c: c["call_index"]):
        starts_new = current is None or c["turn_index"] != current.turn_index or c["issued_s"] > latest_return
        if starts_new:
            current = Batch(c["turn_index"], [])
            out.setdefault(c["turn_index"], []).append(current)
            latest_return = c["returned_s"]
        current.calls.append(c)
        latest_return = max(latest_return, c["returned_s"])
    return out


def trajectory_rows(
    con: duckdb.DuckDBPyConnection, selection_id: str | None, trajectory_id: str | None = None
) -> list[dict]:
    """sql/pages/trajectory_list.sql: every trajectory (or one), with the selection's decision."""
    return db.fetch_dicts(
        con,
        db.read_sql("pages/trajectory_list.sql"),
        {"selection_id": selection_id, "trajectory_id": trajectory_id},
    )


def load(
    con: duckdb.DuckDBPyConnection, trajectory_id: str, selection_id: str | None, row: dict | None = None
) -> TraceView:
    """Everything the page of ``trajectory_id`` shows; an unknown id is a UserError."""
    if row is None:
        rows = trajectory_rows(con, selection_id, trajectory_id)
        if not rows:
            raise UserError(f"show: no trajectory {trajectory_id!r} in the warehouse (ids: `pipeline sql "
                            "\"select trajectory_id from trajectory_scores\"`)")  # fmt: skip
        row = rows[0]
    one = {"trajectory_id": trajectory_id}
    policy = db.fetch_dicts(con, "select * from policies where policy_id = ?", [row["policy_id"]])
    calls = db.fetch_dicts(con, db.read_sql("pages/trajectory_subcalls.sql"), one)
    return TraceView(
        row=row,
        policy=policy[0] if policy else {"policy_id": row["policy_id"]},
        turns=db.fetch_dicts(con, db.read_sql("pages/trajectory_turns.sql"), one),
        batches=group_batches(calls),
        grades=db.fetch_dicts(con, db.read_sql("pages/trajectory_grades.sql"), one),
        coverage=db.fetch_dicts(con, db.read_sql("pages/trajectory_coverage.sql"), one),
        selection_id=selection_id,
    )
