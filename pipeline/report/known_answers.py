"""Report section: the known-answer memos beside base and SFT, on the same held-out rooms.

A reader sees where an empty memo, a pasted room, a claim-everything memo and
the adversarial memos an optimiser would find (near copies, claim stuffing,
wrong citations, repetition) would land on the scale the policies are scored
on, so "SFT 0.4" has a meaning: above every degenerate memo, below the oracle
and an honest paraphrase of it.
"""

from __future__ import annotations

from collections import defaultdict

import duckdb

from pipeline import db
from pipeline.grading.known_answers import check_room
from pipeline.grading.reference import GRADER_VERSION
from pipeline.report.formatting import pct
from pipeline.report.render import Section, Table
from pipeline.rooms import store

SEED = 0  # the adversarial memos' seed: the same memos in every report


def known_answers_section(
    con: duckdb.DuckDBPyConnection, labels: dict[str, str], eval_rows: list[dict]
) -> Section:
    s = Section("Known-answer memos")
    rooms = store.room_names(con, split="heldout")
    if not rooms:
        s.blocks.append("No held-out rooms yet.")
        return s
    by_memo: dict[str, list[dict]] = defaultdict(list)
    for name in rooms:
        for row in check_room(store.load_room(con, name, with_text=True), seed=SEED):
            by_memo[row["memo"]].append(row)
    table = Table(["memo", "rooms", "headline", "recall", "precision", "bar"], [])

    def mean(rows: list[dict], key: str) -> float | None:
        vals = [float(r[key]) for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    policies = db.fetch_dicts(
        con,
        "select policy_id, count(distinct room_id) as rooms, avg(score) as score, avg(recall) as recall, "
        'avg("precision") as "precision", string_agg(distinct grader_version::varchar, \',\') as versions '
        "from trajectory_scores where purpose = 'eval' and graded and list_contains(?, room_id) "
        "group by policy_id order by policy_id",
        [rooms],
    )
    for p in policies:
        table.rows.append(
            [
                f"policy: {labels.get(p['policy_id'], p['policy_id'])}",
                str(p["rooms"]),
                pct(p["score"]),
                pct(p["recall"]),
                pct(p["precision"]),
                f"grader v{p['versions']}",
            ]
        )
    for memo, rows in by_memo.items():
        table.rows.append(
            [
                memo,
                str(len(rows)),
                pct(mean(rows, "headline")),
                pct(mean(rows, "recall")),
                pct(mean(rows, "precision")),
                rows[0]["bar"] + ("" if all(r["ok"] for r in rows) else " MISSED"),
            ]
        )
    s.blocks.append(
        f"Reference judge, grader version {GRADER_VERSION}: headline = F1 of recall (non-trap criteria passed) "
        "and precision (claims the room supports, above chance). Policies are averaged over their held-out "
        "trajectories; each known-answer memo is graded once per held-out room. The adversarial memos are "
        "what an optimiser would try (near_copy: the room pasted with small edits; claim_stuffing: the "
        "oracle plus random claims to the reading budget; wrong_citation: the oracle cited to the wrong "
        f"documents; repetition: one true finding repeated), drawn with seed {SEED}, beside an honest "
        "control (paraphrase: the oracle's findings in a reviewer's words)."
    )
    s.blocks.append(table)
    return s


def known_answer_scale(con: duckdb.DuckDBPyConnection, rooms: list[str]) -> dict[str, float]:
    """Known-answer memo -> its mean headline over ``rooms`` (the same seed as the section above): the
    scale an RL run's rewards are read on, for the rooms its rollouts were drawn from."""
    by_memo: dict[str, list[float]] = defaultdict(list)
    for name in rooms:
        for row in check_room(store.load_room(con, name, with_text=True), seed=SEED):
            by_memo[row["memo"]].append(float(row["headline"]))
    return {memo: sum(v) / len(v) for memo, v in by_memo.items()}
