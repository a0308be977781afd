"""Synthetic LAB-style data rooms: a fictional target, a deal, a folder tree, planted issues, a rubric.

``generate_room(name, seed, ...)`` builds a whole room deterministically from
its arguments: the target and deal, documents under numbered category folders
(``03_material_contracts/<counterparty>/...``, ``01_corporate/board_minutes/<year>/...``),
a scaled number of planted issues and decoys (pipeline.rooms.synthetic.issues) hidden
among ordinary agreements, amendments, minutes, certificates, letters and
spreadsheets, the rubric criteria of those issues, the room's totals
(pipeline.rooms.synthetic.criteria.add_totals), and coverage probes.

Scale: about 6 + 0.045 x n_documents issues (a 20-document room has ~7, a
2,000-document room ~96 with several hundred criteria) and one decoy per five
issues. Documents average ``tokens_per_document`` tokens (chars/4).
"""

from __future__ import annotations

import random

from pipeline.rooms.model import Room
from pipeline.rooms.probes import sample_probes
from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.criteria import add_totals
from pipeline.rooms.synthetic.issues import DECOYS, ISSUES
from pipeline.rooms.synthetic.ordinary import fill
from pipeline.rooms.synthetic.templates import (
    CITIES,
    INDUSTRIES,
    JURISDICTIONS,
    Names,
    Writer,
)

DEAL_TYPES = ["stock purchase", "merger", "reverse triangular merger", "asset purchase"]
# kinds guaranteeing the rubric holds every criterion kind even in a small room
_QUANTIFIED = [
    "debt_coc_default",
    "pending_litigation",
    "exec_cic_payment",
    "tax_assessment",
    "coc_termination",
]


def generate_room(
    name: str,
    seed: int,
    n_documents: int = 20,
    tokens_per_document: int = 600,
    decoys: bool = True,
    split: str = "train",
) -> Room:
    """A complete room (documents, criteria, probes); the same arguments give the same room."""
    if n_documents < 1:
        raise ValueError(f"generate_room: n_documents must be >= 1, got {n_documents}")
    if tokens_per_document < 50:
        raise ValueError(f"generate_room: tokens_per_document must be >= 50, got {tokens_per_document}")
    if split not in ("train", "heldout"):
        raise ValueError(f"generate_room: split must be 'train' or 'heldout', got {split!r}")
    rng = random.Random(seed)
    names = Names(rng)
    target, deal = _target_and_deal(rng, names)
    staff = [names.person() for _ in range(60)]
    others = [names.company()[0] for _ in range(40)]
    writer = Writer(rng, target["short_name"], staff, others)
    ctx = Ctx(
        rng=rng, names=names, writer=writer, target=target, deal=deal, tokens_per_document=tokens_per_document
    )

    issue_kinds, decoy_kinds = _plan(rng, n_documents, decoys)
    for i, kind in enumerate(issue_kinds, 1):
        ISSUES[kind][0](ctx, f"I{i:02d}" if len(issue_kinds) < 100 else f"I{i:03d}")
    for i, kind in enumerate(decoy_kinds, 1):
        DECOYS[kind][0](ctx, f"D{i:02d}" if len(decoy_kinds) < 100 else f"D{i:03d}")
    add_totals(ctx)
    fill(ctx, n_documents - len(ctx.docs))

    docs = sorted(ctx.docs, key=lambda d: d.path)
    room = Room(
        name=name,
        target=target,
        deal=deal,
        documents=docs,
        criteria=ctx.criteria,
        source="generated",
        split=split,
        seed=seed,
    )
    room.probes = sample_probes(room.documents, seed)
    return room


def n_issues_for(n_documents: int) -> int:
    return round(6 + 0.045 * n_documents)


def _target_and_deal(rng: random.Random, names: Names) -> tuple[dict, dict]:
    industry = rng.choice(sorted(INDUSTRIES))
    short, _ = names.company()
    # the target's name reflects its industry for realism
    short = (
        f"{short.split()[0]} {rng.choice(['Robotics', 'Technologies', 'Systems', 'Industries', 'Holdings'])}"
    )
    legal = f"{short}, Inc."
    target = {
        "name": legal,
        "short_name": short,
        "industry": industry,
        "products": INDUSTRIES[industry],
        "jurisdiction": rng.choice(JURISDICTIONS),
        "hq": rng.choice(CITIES),
        "founded": rng.randrange(1985, 2018),
        "ceo": names.person(),
        "cfo": names.person(),
        "counsel": names.person(),
    }
    buyer_short, buyer_legal = names.company()
    deal = {
        "type": rng.choice(DEAL_TYPES),
        "price": float(rng.randrange(40, 4000) * 1_000_000),
        "currency": "USD",
        "buyer": buyer_legal,
        "buyer_short": buyer_short,
        "signing_target": f"Q{rng.randrange(1, 5)} {rng.randrange(2024, 2026)}",
    }
    return target, deal


def _plan(rng: random.Random, n_documents: int, decoys: bool) -> tuple[list[str], list[str]]:
    """Issue and decoy kinds that fit the room, leaving at least a tenth of it ordinary."""
    budget = n_documents - max(1, n_documents // 10) if n_documents > 3 else n_documents
    want = n_issues_for(n_documents)
    want_decoys = max(1, round(want / 5)) if decoys else 0
    if rng.random() < 0.5:
        must = ["missing_side_letter"]
    else:
        must = ["missing_ip_assignment", "amendment_coc"]
    must.append(rng.choice(_QUANTIFIED))
    must.append("value_conflict")  # every room holds figures only a comparison across documents finds
    kinds = sorted(ISSUES)
    decoy_kinds = sorted(DECOYS)
    chosen: list[str] = []
    chosen_decoys: list[str] = []
    used = 0
    # one decoy first (so even a small room has a trap), then the must-haves, then a shuffled cycle of kinds
    dcycle = _cycle(rng, decoy_kinds)
    if want_decoys:
        k = next(dcycle)
        if DECOYS[k][1] <= budget - 1:
            chosen_decoys.append(k)
            used += DECOYS[k][1]
    cycle = _cycle(rng, kinds)
    candidates = list(must)
    attempts = 0
    while len(chosen) < want and attempts < 4 * want + 20:
        attempts += 1
        k = candidates.pop(0) if candidates else next(cycle)
        if k in must and k in chosen:
            continue
        cost = ISSUES[k][1]
        if used + cost <= budget:
            chosen.append(k)
            used += cost
    while len(chosen_decoys) < want_decoys and used + 2 <= budget:
        chosen_decoys.append(next(dcycle))
        used += 2
    rng.shuffle(chosen)  # issue ids carry no hint of which kinds are guaranteed
    return chosen, chosen_decoys


def _cycle(rng: random.Random, items: list[str]):
    while True:
        order = list(items)
        rng.shuffle(order)
        yield from order


__all__ = ["generate_room", "n_issues_for"]
