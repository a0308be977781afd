"""The oracle memo: one concise paragraph per planted issue, written from the rubric's own evidence.

The reference for what a perfect memo holds (pipeline.grading.known_answers);
the adversarial memos (pipeline.grading.adversarial) start from it, so it
lives apart from both.
"""

from __future__ import annotations

import re

from pipeline.grading.criteria import normalize
from pipeline.rooms.model import Criterion, Room

_SPACES = re.compile(r"\s+")


def _phrase(group: list[str], forbidden: set[str]) -> str:
    for p in group:
        if not any(f in normalize(p) for f in forbidden):
            return p
    return group[0]


def _short_quote(text: str, words: int = 25) -> str:
    """The first ``words`` words of ``text``: a cited quote, not a pasted clause."""
    parts = text.replace('"', "'").split()  # a quote inside the quote nests as single quotes
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


def evidence_memo(room: Room, cite: dict[str, str] | None = None) -> str:
    """The oracle: a memo written from the rubric's own evidence, one paragraph per planted issue, no decoys.

    The reference for what a perfect memo holds; it should pass (nearly) every
    non-trap criterion and every trap. ``cite`` maps a path to the path cited
    in its place (the wrong-citation memo).
    """
    cite = cite or {}
    by_issue: dict[str, list[Criterion]] = {}
    for c in room.criteria:
        if not c.is_trap:
            by_issue.setdefault(c.issue_id or c.criterion_id, []).append(c)
    paras = [
        f"Diligence memo: {room.target.get('name', room.name)} ({room.deal.get('type', 'acquisition')} by "
        f"{room.deal.get('buyer', 'the buyer')})."
    ]
    for iid, crits in by_issue.items():
        forbidden = {normalize(f) for c in crits for f in c.forbidden}
        entities: list[str] = []
        found: list[str] = []
        steps: list[str] = []
        amounts: list[str] = []
        paths: list[str] = []
        for c in crits:
            entities += [e for e in c.entities if e not in entities]
            bucket = steps if c.kind == "next_step" else found
            bucket += [p for p in (_phrase(g, forbidden) for g in c.any_of) if p not in found + steps]
            amounts += [f"${a.value:,.0f}" for a in c.amounts if f"${a.value:,.0f}" not in amounts]
            paths += [cite.get(p, p) for p in c.paths if cite.get(p, p) not in paths]
        kind = (crits[0].issue_kind or "issue").replace("_", " ")
        # a total has no one clause to quote (its evidence is its parts' clauses, each quoted where it is found)
        evidence = "" if crits[0].kind == "total" else crits[0].evidence
        text = (
            f"{iid} ({kind}) - {', '.join(entities)}: {'; '.join(found) or 'see evidence'}."
            + (f" Amount: {', '.join(amounts)}." if amounts else "")
            + f" Sources: {', '.join(paths)}."
            + (f" Next step: {'; '.join(steps)}." if steps else "")
            + (f' Evidence: "{_short_quote(evidence)}"' if evidence else "")
        )
        paras.append(_SPACES.sub(" ", text))
    return "\n\n".join(paras) + "\n"
