"""Planted issues about people: an executive's change-in-control payment, an inventor who never assigned.

Each builder writes the employment documents that show the issue, then the
issue's criteria through ``Finding``; the key entity is the person.
"""

from __future__ import annotations

from pipeline.rooms.synthetic.context import Ctx, Party
from pipeline.rooms.synthetic.criteria import Finding, phrases
from pipeline.rooms.synthetic.documents import filed_agreement, piia, report
from pipeline.rooms.synthetic.templates import money, slug


def exec_cic_payment(ctx: Ctx, iid: str) -> None:
    name = ctx.person()
    first = name.split()[0]
    salary = ctx.rng.randrange(28, 70) * 10_000
    mult = ctx.rng.choice([1.5, 2, 2.5, 3])
    payment = int(salary * 1.5 * mult)
    clause = (
        f"If a Change in Control occurs while {name} is employed by the Company, the Company shall pay {first} a "
        f"lump-sum transaction bonus equal to {mult} times the sum of base salary and target bonus, being "
        f"{money(payment)}, within ten (10) days following the Change in Control, whether or not employment "
        "terminates, and all outstanding equity awards held by the Executive shall vest in full."
    )
    comp = f"The Executive's annual base salary is {money(salary)} and the target bonus is fifty percent of base salary."
    title = "Executive Employment Agreement"
    role = ctx.rng.choice(
        [
            "Chief Operating Officer",
            "Chief Revenue Officer",
            "Chief Technology Officer",
            "Executive Vice President, Sales",
        ]
    )
    # the executive signs for themselves
    party = Party(name, f"{name}, an individual", slug(name))
    path, _ = filed_agreement(
        ctx,
        party,
        "employment",
        title,
        "Executive",
        [("Compensation", comp), ("Transaction Bonus", clause)],
        stem="employment_agreement",
        sub=f"executives/{party.slug}",
        recital=f"the Company wishes to employ {name} as its {role}",
    )
    f = Finding(ctx, iid, "exec_cic_payment", name, clause, path)
    f.identify(f"The memo flags the single-trigger change-in-control payment owed to {name}.")
    f.cite(f"The memo cites {path} for {name}'s change-in-control payment.")
    f.quantify(
        f"The memo states the amount of {name}'s change-in-control payment ({money(payment)}).", payment, 0.02
    )
    f.next_step(
        f"The memo recommends treating {name}'s payment as a transaction expense in the "
        "price / funds flow, or a 280G analysis, or seeking a waiver.",
        [["280g", "transaction expense", "funds flow", "purchase price", "waive", "budget", "escrow"]],
    )


def missing_ip_assignment(ctx: Ctx, iid: str) -> None:
    inventors = [ctx.person() for _ in range(3)]
    missing = inventors[-1]
    number = f"{ctx.rng.randrange(10, 12)},{ctx.rng.randrange(100, 999)},{ctx.rng.randrange(100, 999)}"
    product = ctx.rng.choice(ctx.target["products"])
    listing = (
        f"Inventors: {inventors[0]}, {inventors[1]} and {missing}, each of whom was an engineer employed by the "
        f"Company when the claimed invention relating to {product} was conceived."
    )
    title = f"United States Patent No. {number}"
    intro = f"{title}, issued {ctx.date()}. Applicant and assignee of record: {ctx.t_legal}."
    text = report(ctx, title, intro, planted=[("Inventorship", listing)])
    filename = f"us_patent_{number.replace(',', '')}.txt"
    ppath = ctx.add("intellectual_property", "patents", filename, f"US Patent {number}", text, "patent")
    # the co-inventors signed theirs, so the gap shows only against the employment records
    assigned = [piia(ctx, n, ctx.date())[0] for n in inventors[:2]]
    f = Finding(ctx, iid, "missing_ip_assignment", missing, listing, ppath)
    f.identify(
        f"The memo flags that inventor {missing} on US Patent {number} has no invention assignment on file."
    )
    f.absence(
        f"The memo notes that no PIIA / invention assignment signed by {missing} is in the "
        f"employment records, although the co-inventors signed theirs.",
        [
            phrases(
                "missing; absent; no piia; no invention assignment; no assignment; not signed; never signed; lacks; lacking; without; not located; not found; not included; unsigned; no signed"
            ),
            ["assign", "piia"],
        ],
        [ppath, *assigned],
    )
    f.cite(f"The memo cites the patent {ppath} listing {missing} as an inventor.")
    f.next_step(
        f"The memo recommends obtaining a confirmatory (nunc pro tunc) assignment from {missing} before closing.",
        [
            phrases(
                "confirmatory assignment; obtain an assignment; obtain assignment; execute an assignment; require assignment; require an assignment; nunc pro tunc; obtain a signed; assignment from"
            )
        ],
    )
