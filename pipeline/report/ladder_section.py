"""The report's "What the root can earn" section: the program-check ladder on the run's rooms, and
where the sampled programs land on it.

Reads the marts ``room_ladder`` (each reference program's score on each room) and
``trajectory_rungs`` (each graded trajectory placed on its room's ladder). A root that
only copies its prompt lands on one rung; a root whose programs vary spreads over
several, and training should move the spread up the ladder.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

import duckdb

from pipeline import db
from pipeline.grading.program_check import load_ladder
from pipeline.report.formatting import pct
from pipeline.report.render import Section, Table

BELOW = "below nothing"


def ladder_section(con: duckdb.DuckDBPyConnection, labels: dict[str, str]) -> Section | None:
    """None when the run's rooms have no ladder yet (a run folder from before the ladder step)."""
    ladder = db.fetch_dicts(con, "select * from room_ladder order by room_id, rung_index")
    if not ladder:
        return None
    rungs = load_ladder()
    order = [r.name for r in rungs]
    skill = {r.name: r.skill for r in rungs}
    s = Section("What the root can earn (program-check ladder)")
    s.blocks.append(
        "Reference root programs (pipeline/grading/ladder.yaml), each run once through the harness and judged "
        "on this run's rooms: what reading more, joining across documents, checking what is missing, "
        "totalling and recommending are worth here. `python -m pipeline program-check` holds the ladder's "
        "margins on rooms of unseen seeds."
    )
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in ladder:
        by[r["rung"], r["split"]].append(r["headline"])
    splits = sorted({r["split"] for r in ladder})
    rows = [
        [
            rung,
            skill.get(rung, ""),
            *(pct(statistics.fmean(by[rung, sp])) if by[rung, sp] else "" for sp in splits),
        ]
        for rung in order
    ]
    s.blocks.append(
        Table(
            ["rung", "what it adds", *(f"mean on {sp} rooms" for sp in splits)],
            rows,
            "Mean headline per rung.",
        )
    )
    placed = db.fetch_dicts(con, "select policy_id, purpose, room_id, rung, headline from trajectory_rungs")
    if placed:
        s.blocks.append(_placement_table(placed, labels, [BELOW, *order]))
    return s


def _placement_table(placed: list[dict], labels: dict[str, str], columns: list[str]) -> Table:
    """Share of each policy's trajectories per rung, and the distinct score levels per room (median)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in placed:
        groups[r["policy_id"], r["purpose"]].append(r)
    rows = []
    for (policy, purpose), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        counts = Counter(r["rung"] for r in rs)
        levels: dict[str, set[float]] = defaultdict(set)
        for r in rs:
            levels[r["room_id"]].add(round(r["headline"], 4))
        spread = statistics.median(len(v) for v in levels.values())
        rows.append(
            [
                labels.get(policy, policy),
                purpose,
                str(len(rs)),
                *(pct(counts[c] / len(rs)) if counts[c] else "" for c in columns),
                f"{spread:g}",
            ]
        )
    return Table(
        ["policy", "purpose", "trajectories", *columns, "score levels per room (median)"],
        rows,
        "Each graded trajectory at the highest rung its room's reference program scored no more than it did. "
        "Score levels: distinct scores among a room's trajectories; 1 means every trajectory of the room "
        "scored the same, and training has nothing to choose between.",
    )
