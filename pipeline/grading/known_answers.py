"""Known-answer memos: the grader's own tests, on any room.

Each memo has a known right answer, so where the reference judge puts it says
whether the judge measures diligence:

| memo | what it is | headline should be |
|---|---|---|
| empty | nothing | near 0 |
| oracle | one concise paragraph per planted issue, from the rubric's evidence | near 1 |
| dump | every document pasted whole, one paragraph each, "<path>: <text>" | near 0 |
| dump_phrases | the dump, each paragraph followed by risk phrases and generic next steps | near 0 |
| claim_all | every claim kind claimed on every document, one paragraph per pair | near 0 |
| claim_absence | every document's side letter and invention assignments called missing from the room | near 0 |
| claim_conflict | every document's fees called inconsistent with the rest of the room | near 0 |
| expert_labels | CUAD rooms only: from CUAD's own label table (master_clauses.csv), not the rubric | near 1 |

and the adversarial memos of pipeline.grading.adversarial, drawn from a seed
(what an optimiser would try, and the honest control):

| memo | what it is | headline should be |
|---|---|---|
| near_copy | the room's issue paragraphs pasted with small edits (never 8 words verbatim) | near 0 |
| claim_stuffing | the oracle, then short claims of random kinds on random documents to the budget | near 0 |
| wrong_citation | the oracle, each finding cited to a document that does not support it | near 0 |
| repetition | one true finding, lightly edited, repeated to the budget | near 0 |
| paraphrase | every finding of the oracle in a reviewer's words, same citations | near 1 |

``BARS`` holds the bounds the tests and ``python -m pipeline grader-check``
hold the judge to. ``check_room`` draws the adversarial memos with ``seed``
(0 by default, so the gate and the report are reproducible); the tests draw
a fresh seed each run.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline import db
from pipeline.grading import adversarial
from pipeline.grading.oracle import evidence_memo
from pipeline.grading.reference import ReferenceGrader, claim_truth
from pipeline.rooms import store
from pipeline.rooms.model import Room
from pipeline.rooms.store import RoomError

# memo -> (lowest, highest) headline it may score
BARS: dict[str, tuple[float, float]] = {
    "empty": (0.0, 0.05),
    "oracle": (0.95, 1.0),
    "dump": (0.0, 0.15),
    "dump_phrases": (0.0, 0.15),
    "claim_all": (0.0, 0.15),
    "claim_absence": (0.0, 0.15),
    "claim_conflict": (0.0, 0.15),
    "expert_labels": (0.90, 1.0),
    "near_copy": (0.0, 0.15),
    # F1 of recall 1 and precision above chance 0-0.1 (4 to 10 false claims per true one): mean 0.09,
    # at most 0.19 over 300 generated rooms
    "claim_stuffing": (0.0, 0.25),
    "wrong_citation": (0.0, 0.15),
    "repetition": (0.0, 0.15),
    "paraphrase": (0.90, 1.0),
}
ADVERSARIAL = ("near_copy", "claim_stuffing", "wrong_citation", "repetition", "paraphrase")

RISK_PHRASES = (
    "Risks: change of control termination right; consent required for assignment by merger or operation of law; "
    "exclusivity and non-compete binding affiliates; most favoured nation pricing; uncapped indemnity with no cap; "
    "event of default and acceleration on a change of control; pending litigation and claims; change in control "
    "severance and bonus payments; missing invention assignment for patents; landlord consent to assignment; "
    "expired permit; security breach not notified; side letter; tax assessment and audit."
)
GENERIC_NEXT_STEPS = (
    "Next steps: obtain consents and waivers before closing; seek a specific indemnity, escrow or insurance; "
    "review, renegotiate and amend the affected agreements; confirm payoff and release; quantify exposure."
)


def empty_memo(room: Room) -> str:
    return ""


def dump_memo(room: Room) -> str:
    return "\n\n".join(f"{d.path}: {' '.join(d.text.split())}" for d in room.documents)


def dump_phrases_memo(room: Room) -> str:
    return "\n\n".join(
        f"{d.path}: {' '.join(d.text.split())} {RISK_PHRASES} {GENERIC_NEXT_STEPS}" for d in room.documents
    )


def claim_all_memo(room: Room) -> str:
    """One paragraph per (document, claim kind): the kind's first phrase of every group, and a next step."""
    kinds = claim_truth(room).kinds
    paras = []
    for d in room.documents:
        for kind, groups in kinds.items():
            phrases = ", ".join(g[0] for g in groups)
            paras.append(f"{d.path}: {kind.replace('_', ' ')} ({phrases}). {GENERIC_NEXT_STEPS}")
    return "\n\n".join(paras)


def claim_absence_memo(room: Room) -> str:
    """Absence claimed everywhere: per document, its side letter and its inventors' assignments called missing.

    What a root writes when it asserts absence instead of checking the room (the filed side letter's trap
    and the claims' citations catch it).
    """
    return "\n\n".join(
        f"{d.path} ({d.title}): the side letter it refers to is not in the data room, and no invention "
        "assignment (PIIA) for the patents it concerns has been provided."
        for d in room.documents
    )


def claim_conflict_memo(room: Room) -> str:
    """Inconsistency claimed everywhere: per document, the fees it states said not to match the room's other figures.

    What a root writes when it asserts a conflict instead of comparing the figures (the trap of fees that
    agree, and the claims' citations, catch it).
    """
    return "\n\n".join(
        f"{d.path} ({d.title}): the fees it states do not match the figures elsewhere in the data room; "
        "reconcile them with management before relying on either."
        for d in room.documents
    )


def expert_label_memo(room: Room, corpus: str | Path) -> str:
    """A memo written from CUAD's label table: per contract, the categories its experts labelled Yes.

    Contracts are matched to the room's documents by their text, so the memo
    owes nothing to the project's rubric.
    """
    from pipeline.rooms.cuad import CATEGORIES_CUAD, load_cuad

    labelled, _ = load_cuad(corpus)
    by_text = {c.text: c for c in labelled}
    paras = [f"Diligence memo: {room.target.get('name', room.name)}, from the CUAD expert labels."]
    for d in room.documents:
        c = by_text.get(d.text)
        if c is None:
            continue
        found = [cat.label for cat in CATEGORIES_CUAD if c.labelled_yes(cat.column)]
        if found:
            paras.append(
                f"{d.path} ({' '.join(c.name.split())}) contains {', '.join(found)} terms; review each before signing."
            )
    return "\n\n".join(paras)


def known_memos(room: Room, corpus: str | Path | None = None, seed: int = 0) -> dict[str, str]:
    """name -> memo for every known-answer memo that applies to ``room``; adversarial ones drawn with ``seed``."""
    makers: dict[str, Callable[[Room], str]] = {
        "empty": empty_memo,
        "oracle": evidence_memo,
        "dump": dump_memo,
        "dump_phrases": dump_phrases_memo,
        "claim_all": claim_all_memo,
        "claim_absence": claim_absence_memo,
        "claim_conflict": claim_conflict_memo,
    }
    out = {name: make(room) for name, make in makers.items()}
    for name in ADVERSARIAL:
        rng = random.Random(f"{seed}:{room.name}:{name}")
        out[name] = getattr(adversarial, f"{name}_memo")(room, rng)
    if room.source == "cuad" and corpus is not None and (Path(corpus) / "cuad").is_dir():
        out["expert_labels"] = expert_label_memo(room, corpus)
    return out


def check_room(
    room: Room, corpus: str | Path | None = None, grader: ReferenceGrader | None = None, seed: int = 0
) -> list[dict]:
    """One row per known-answer memo: headline, recall, precision, the bar and whether it holds."""
    grader = grader or ReferenceGrader(room)
    rows = []
    for name, memo in known_memos(room, corpus, seed).items():
        g = grader.grade(memo)
        low, high = BARS[name]
        rows.append(
            {
                "room": room.name,
                "source": room.source,
                "memo": name,
                "headline": round(g.headline, 4),
                "recall": round(g.recall, 4),
                "precision": round(g.precision, 4),
                "claims": g.n_claims,
                "false_claims": g.n_false_claims,
                "cut": g.cut,
                "bar": f"[{low:.2f}, {high:.2f}]",
                "ok": low <= g.headline <= high,
                "seed": seed if name in ADVERSARIAL else None,
            }
        )
    return rows


def check_warehouse(
    con: duckdb.DuckDBPyConnection, corpus: str | Path | None, names: list[str] | None, seed: int = 0
) -> list[dict]:
    """``check_room`` rows for every room in the warehouse (or the ``names`` given)."""
    rows = []
    for name in names or store.room_names(con):
        rows += check_room(store.load_room(con, name, with_text=True), corpus, seed=seed)
    return rows


def print_warehouse_check(db_path: Path, corpus: str | None, names: list[str] | None, seed: int = 0) -> int:
    """`python -m pipeline grader-check`: the known-answer table, one line per room and memo; 1 if a bar fails."""
    if not Path(db_path).exists():
        raise RoomError(f"no warehouse at {db_path} (run `rooms generate` or `rooms cuad` first)")
    if corpus is not None and not (Path(corpus) / "cuad").is_dir():
        raise RoomError(f"--corpus {corpus}: no cuad/ folder in it")
    con = db.connect(db_path)
    try:
        rows = check_warehouse(con, corpus, names, seed)
    finally:
        con.close()
    if not rows:
        raise RoomError(f"{db_path}: no rooms to check")
    out = duckdb.connect()
    out.register("known_answers", pa.Table.from_pylist(rows))
    out.sql("select * from known_answers").show(max_rows=10_000, max_width=200)
    failed = [r for r in rows if not r["ok"]]
    for r in failed:
        drawn = f" (drawn with seed {r['seed']})" if r["seed"] is not None else ""
        print(
            f"FAIL {r['room']} {r['memo']}: headline {r['headline']:.3f} outside {r['bar']}{drawn}",
            file=sys.stderr,
        )
    print(f"{len(rows) - len(failed)} of {len(rows)} known-answer rows within their bars", file=sys.stderr)
    return 1 if failed else 0
