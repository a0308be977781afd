"""Synthetic LAB-style data rooms: a fictional target, a deal, a folder tree, planted issues, a rubric.

``generate_room(name, seed, ...)`` builds a whole room deterministically from
its arguments: the target and deal, documents under numbered category folders
(``03_material_contracts/<counterparty>/...``, ``01_corporate/board_minutes/<year>/...``),
a scaled number of planted issues and decoys (pipeline.rooms.issues) hidden
among ordinary agreements, amendments, minutes, certificates, letters and
spreadsheets, the rubric criteria of those issues, and coverage probes.

Scale: about 6 + 0.045 x n_documents issues (a 20-document room has ~7, a
2,000-document room ~96 with several hundred criteria) and one decoy per five
issues. Documents average ``tokens_per_document`` tokens (chars/4).
"""

from __future__ import annotations

import random

from pipeline.rooms.issues import DECOYS, ISSUES, Ctx, agreement, amendment, letter, minutes, piia, report
from pipeline.rooms.model import Room
from pipeline.rooms.probes import sample_probes
from pipeline.rooms.templates import (
    CITIES,
    INDUSTRIES,
    JURISDICTIONS,
    Names,
    Writer,
    money,
    slug,
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

# filler category -> relative weight (how much of an ordinary room each category takes)
FILLER_WEIGHTS = {
    "corporate": 8,
    "capitalization": 4,
    "material_contracts": 14,
    "customers": 12,
    "suppliers": 10,
    "financing": 4,
    "real_estate": 4,
    "intellectual_property": 6,
    "employment": 12,
    "litigation": 3,
    "regulatory": 5,
    "tax": 5,
    "insurance": 4,
    "environmental": 3,
    "data_privacy": 4,
    "financial_statements": 6,
}
AGREEMENT_TITLES = {
    "material_contracts": [
        ("Master Services Agreement", "Customer"),
        ("Joint Development Agreement", "Partner"),
        ("Consulting Agreement", "Consultant"),
        ("Marketing Services Agreement", "Agency"),
    ],
    "customers": [
        ("Customer Agreement", "Customer"),
        ("Order Form", "Customer"),
        ("Sales Agreement", "Customer"),
    ],
    "suppliers": [
        ("Supply Agreement", "Supplier"),
        ("Purchase Agreement", "Supplier"),
        ("Logistics Services Agreement", "Provider"),
    ],
    "financing": [("Promissory Note", "Holder"), ("Equipment Lease", "Lessor")],
    "real_estate": [("Lease Agreement", "Landlord"), ("Sublease Agreement", "Sublandlord")],
    "intellectual_property": [
        ("Software License Agreement", "Licensor"),
        ("Trademark Coexistence Agreement", "Owner"),
    ],
    "data_privacy": [("Data Processing Agreement", "Processor")],
    "insurance": [("Broker Services Agreement", "Broker")],
}


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
    _fill(ctx, n_documents - len(ctx.docs))

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


# ---------------------------------------------------------------- ordinary documents
def _fill(ctx: Ctx, n: int) -> None:
    cats = list(FILLER_WEIGHTS)
    weights = [FILLER_WEIGHTS[c] for c in cats]
    counterparties: dict[str, list[dict]] = {c: [] for c in cats}
    engineers: list[str] = []
    ctx.limit = len(ctx.docs) + n
    while len(ctx.docs) < ctx.limit:
        cat = ctx.rng.choices(cats, weights)[0]
        _FILLERS[cat](ctx, counterparties[cat], engineers)


def _counterparty(ctx: Ctx, pool: list[dict]) -> tuple[dict, bool]:
    """A counterparty for the next document: often a new one, sometimes one already in the folder.

    A pool entry records the agreements made with it ({title: (date, amendments so far)}) so
    that an amendment always amends an agreement that is in the room, numbered in sequence.
    """
    if pool and ctx.rng.random() < 0.3:
        return pool[ctx.rng.randrange(len(pool))], True
    short, legal = ctx.names.company()
    entry = {"short": short, "legal": legal, "agreements": {}}
    pool.append(entry)
    return entry, False


def _contract(ctx: Ctx, category: str, pool, _eng) -> None:
    cp, seen = _counterparty(ctx, pool)
    short, legal = cp["short"], cp["legal"]
    s = slug(short)
    if seen and cp["agreements"] and ctx.rng.random() < 0.5:
        title = sorted(cp["agreements"])[ctx.rng.randrange(len(cp["agreements"]))]
        odate, n = cp["agreements"][title]
        n += 1
        cp["agreements"][title] = (odate, n)
        text = amendment(
            ctx,
            n,
            title,
            legal,
            ctx.date(),
            odate,
            [
                f"The Term is extended by {ctx.rng.randrange(12, 37)} months from the current expiry date, and the parties "
                f"confirm that {short} has no outstanding claims for service credits.",
                f"The Fees set out in Schedule A are increased by {ctx.rng.randrange(2, 7)} percent with effect from "
                f"{ctx.date()}.",
            ],
        )
        ctx.add(
            category,
            s,
            f"amendment_no_{n}_{slug(title)}_{s}.txt",
            f"Amendment No. {n} - {title} - {short}",
            text,
            "amendment",
        )
        return
    title, role = ctx.rng.choice(AGREEMENT_TITLES[category])
    odate = ctx.date()
    if title in cp["agreements"]:
        title = f"{title} ({odate.rsplit(' ', 1)[1]})"
    cp["agreements"][title] = (odate, 0)
    text, _ = agreement(ctx, title, legal, role, odate)
    ctx.add(category, s, f"{slug(title)}_{s}.txt", f"{title} - {short}", text, "agreement")


def _year(ctx: Ctx) -> int:
    return ctx.rng.randrange(2018, 2025)


def _corporate(ctx: Ctx, pool, eng) -> None:
    r = ctx.rng.random()
    if r < 0.5:
        d = ctx.date()
        text = minutes(
            ctx,
            d,
            [
                f"The Chief Financial Officer presented the financial results for the quarter, "
                f"reporting revenue of {money(ctx.rng.randrange(20, 900) * 100_000)} and a cash "
                f"balance of {money(ctx.rng.randrange(10, 500) * 100_000)}."
            ],
        )
        ctx.add(
            "corporate",
            f"board_minutes/{d.rsplit(' ', 1)[1]}",
            f"board_minutes_{slug(d)}.txt",
            f"Board minutes {d}",
            text,
            "minutes",
        )
    elif r < 0.75:
        d = ctx.date()
        text = report(
            ctx,
            "Officer's Certificate",
            f"The undersigned, {ctx.target['cfo']}, Chief Financial Officer of "
            f"{ctx.t_legal}, hereby certifies on {d} on behalf of the Company and not in a personal "
            "capacity as follows.",
            chars=max(800, ctx.size() // 3),
        )
        ctx.add(
            "corporate",
            "certificates",
            f"officers_certificate_{slug(d)}.txt",
            f"Officer's certificate {d}",
            text,
            "certificate",
        )
    else:
        d = ctx.date()
        text = report(
            ctx,
            "Unanimous Written Consent of the Board of Directors",
            f"The undersigned, being all of the "
            f"directors of {ctx.t_legal}, adopt the following resolutions by written consent on {d}.",
        )
        ctx.add(
            "corporate",
            "written_consents",
            f"written_consent_{slug(d)}.txt",
            f"Written consent {d}",
            text,
            "consent",
        )


def _table(ctx: Ctx, category: str, sub: str, filename: str, title: str, columns: list[str], row_fn) -> None:
    rows = max(5, ctx.size() // 70)
    text = ctx.writer.table(
        f"{title.upper()}\n\nPrepared by the finance team of {ctx.t_legal.rstrip('.')}. Amounts in USD.",
        columns,
        rows,
        row_fn,
    )
    ctx.add(category, sub, filename, title, text, "spreadsheet")


def _rows_money(ctx: Ctx, names: list[str], year: int | None = None):
    r = ctx.rng
    dates = ctx.writer.dates
    if year is not None:  # a year's table holds that year's dates
        dates = [d for d in dates if d.endswith(str(year))]

    def row(i: int) -> list[str]:
        return [
            dates[r.randrange(len(dates))],
            names[r.randrange(len(names))],
            f"{r.randrange(1, 99999) * 37:,}",
            str(r.randrange(1, 400)),
            f"{r.randrange(1, 999) / 10:.1f}%",
        ]

    return row


def _capitalization(ctx: Ctx, pool, eng) -> None:
    y = _year(ctx)
    holders = ctx.writer.people
    _table(
        ctx,
        "capitalization",
        f"cap_tables/{y}",
        f"cap_table_{y}_{ctx.rng.randrange(1, 13):02d}.txt",
        f"Capitalization table {y}",
        ["Date", "Holder", "Shares", "Grant", "Fully diluted"],
        _rows_money(ctx, holders, y),
    )


def _money_table(category: str, stem: str, label: str):
    def f(ctx: Ctx, pool, eng) -> None:
        y = _year(ctx)
        _table(
            ctx,
            category,
            str(y),
            f"{stem}_{y}_{ctx.rng.randrange(1, 13):02d}.txt",
            f"{label} {y}",
            ["Date", "Name", "Amount", "Count", "Share"],
            _rows_money(ctx, ctx.writer.companies, y),
        )

    return f


def _employment(ctx: Ctx, pool, eng) -> None:
    r = ctx.rng.random()
    if r < 0.6 and len(ctx.docs) + 2 <= ctx.limit:
        # an engineer hired with the usual paperwork: offer letter and a signed PIIA
        name = ctx.person()
        eng.append(name)
        d = ctx.date()
        offer = (
            f"We are pleased to offer you the position of Software Engineer at {ctx.t_legal}, starting {d}, at "
            f"an annual base salary of {money(ctx.rng.randrange(9, 25) * 10_000)}."
        )
        text = letter(ctx, ctx.t_legal, name, d, "Offer of employment", [offer], ctx.t_short)
        ctx.add(
            "employment",
            f"offer_letters/{slug(name)}",
            f"offer_letter_{slug(name)}.txt",
            f"Offer letter - {name}",
            text,
            "letter",
        )
        piia(ctx, name, d)
    elif r < 0.8:
        y = _year(ctx)
        _table(
            ctx,
            "employment",
            f"headcount/{y}",
            f"headcount_{y}.txt",
            f"Headcount report {y}",
            ["Start date", "Employee", "Salary", "Grade", "Bonus target"],
            _rows_money(ctx, ctx.writer.people, y),
        )
    else:
        plan = ctx.rng.choice(
            ["401(k) Plan", "Employee Handbook", "Health and Welfare Plan", "Equity Incentive Plan"]
        )
        text = report(
            ctx,
            f"{ctx.t_short} {plan}",
            f"This document describes the {plan} of {ctx.t_legal} as in effect from {ctx.date()}.",
        )
        ctx.add(
            "employment", "plans", f"{slug(plan)}_{ctx.rng.randrange(2015, 2025)}.txt", plan, text, "policy"
        )


def _reportish(category: str, sub: str, titles: list[str]):
    def f(ctx: Ctx, pool, eng) -> None:
        title = ctx.rng.choice(titles)
        d = ctx.date()
        text = report(
            ctx, title, f"Prepared for {ctx.t_legal} on {d} by {ctx.rng.choice(ctx.writer.companies)}."
        )
        ctx.add(category, sub, f"{slug(title)}_{slug(d)}.txt", f"{title} ({d})", text, "report")

    return f


def _letters(category: str, sub: str, subjects: list[str]):
    def f(ctx: Ctx, pool, eng) -> None:
        cp, _ = _counterparty(ctx, pool)
        short, legal = cp["short"], cp["legal"]
        subject = ctx.rng.choice(subjects)
        d = ctx.date()
        text = letter(ctx, legal, ctx.t_legal, d, subject, [ctx.writer.paragraph("", short)], short)
        ctx.add(
            category,
            f"{sub}/{slug(short)}",
            f"{slug(subject)}_{slug(d)}.txt",
            f"{subject} - {short}",
            text,
            "letter",
        )

    return f


def _mix(*fns):
    def f(ctx: Ctx, pool, eng) -> None:
        ctx.rng.choice(fns)(ctx, pool, eng)

    return f


def _agreements(category: str):
    return lambda ctx, pool, eng: _contract(ctx, category, pool, eng)


_FILLERS = {
    "corporate": _corporate,
    "capitalization": _mix(
        _capitalization,
        _reportish("capitalization", "plans", ["Stock Option Plan", "Investor Rights Summary"]),
    ),
    "material_contracts": _agreements("material_contracts"),
    "customers": _mix(
        _agreements("customers"),
        _agreements("customers"),
        _money_table("customers", "customer_revenue", "Customer revenue"),
    ),
    "suppliers": _mix(
        _agreements("suppliers"),
        _agreements("suppliers"),
        _letters("suppliers", "correspondence", ["Price adjustment notice", "Delivery schedule"]),
    ),
    "financing": _mix(_agreements("financing"), _money_table("financing", "debt_schedule", "Debt schedule")),
    "real_estate": _mix(
        _agreements("real_estate"),
        _reportish("real_estate", "surveys", ["Property Condition Report", "Title Report"]),
    ),
    "intellectual_property": _mix(
        _agreements("intellectual_property"),
        _reportish("intellectual_property", "trademarks", ["Trademark Portfolio Report"]),
    ),
    "employment": _employment,
    "litigation": _letters(
        "litigation", "correspondence", ["Routine demand resolved", "Litigation hold notice"]
    ),
    "regulatory": _reportish(
        "regulatory",
        "licenses",
        ["Business License Summary", "Export Classification Memo", "Product Registration Report"],
    ),
    "tax": _mix(
        _money_table("tax", "tax_payments", "Tax payments"),
        _reportish("tax", "returns", ["Federal Return Summary", "Sales Tax Filing Summary"]),
    ),
    "insurance": _mix(_agreements("insurance"), _money_table("insurance", "loss_runs", "Loss run")),
    "environmental": _reportish(
        "environmental",
        "site_assessments",
        ["Phase I Environmental Site Assessment", "Waste Manifest Summary"],
    ),
    "data_privacy": _mix(
        _agreements("data_privacy"),
        _reportish("data_privacy", "policies", ["Privacy Policy", "Security Assessment Summary"]),
    ),
    "financial_statements": _mix(
        _money_table("financial_statements", "management_accounts", "Management accounts"),
        _reportish(
            "financial_statements", "audited", ["Audited Financial Statements", "Quality of Earnings Summary"]
        ),
    ),
}

__all__ = ["generate_room", "n_issues_for"]
