"""Ordinary documents of a synthetic room: the agreements, minutes, tables and letters the issues hide among.

``fill(ctx, n)`` adds n documents across the diligence categories in the
proportions of ``FILLER_WEIGHTS``; counterparties recur, and an amendment always
amends an agreement already in the room. Nothing here plants an issue: the
templates (pipeline.rooms.synthetic.templates) avoid every trigger phrase.
"""

from __future__ import annotations

from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.documents import agreement, amendment, filed_minutes, letter, piia, report
from pipeline.rooms.synthetic.templates import money, slug

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


def fill(ctx: Ctx, n: int) -> None:
    """Add ``n`` ordinary documents, categories drawn by FILLER_WEIGHTS."""
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
        filed_minutes(
            ctx,
            ctx.date(),
            [
                f"The Chief Financial Officer presented the financial results for the quarter, "
                f"reporting revenue of {money(ctx.rng.randrange(20, 900) * 100_000)} and a cash "
                f"balance of {money(ctx.rng.randrange(10, 500) * 100_000)}."
            ],
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
