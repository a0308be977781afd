"""Planted issues in the target's contracts: rights a counterparty gets on the deal, and terms that bind the buyer.

Each builder writes the agreement (and any amendment or minutes) that carries
the clause, then the issue's criteria through ``Finding``.
"""

from __future__ import annotations

from pipeline.grading.claim_kinds import NOT_IN_ROOM
from pipeline.rooms.synthetic.context import Ctx, Party
from pipeline.rooms.synthetic.criteria import CONSENT, OBTAIN, Finding, phrases
from pipeline.rooms.synthetic.documents import (
    agreement,
    filed_agreement,
    filed_amendment,
    filed_minutes,
    report,
)
from pipeline.rooms.synthetic.templates import money, slug


def coc_termination(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    fees = ctx.rng.randrange(20, 400) * 25_000
    clause = (
        f"{short} may terminate this Agreement upon thirty (30) days' written notice to the Company if the Company "
        f"undergoes a Change of Control without the prior written consent of {short}, and for this purpose "
        f'"Change of Control" means any transaction in which any person acquires more than fifty percent (50%) of '
        f"the voting securities of the Company, whether by merger, stock purchase or otherwise."
    )
    fee_clause = (
        f"The Fees payable by {short} under this Agreement for each Contract Year are {money(fees)}, "
        f"invoiced quarterly in arrears."
    )
    title = "Master Services Agreement"
    planted = [("Termination", clause), ("Fees", fee_clause)]
    path, _ = filed_agreement(ctx, party, "material_contracts", title, "Customer", planted)
    f = Finding(ctx, iid, "coc_termination", short, clause, path)
    f.identify(
        f"The memo flags that the {short} {title} lets {short} terminate if the Company "
        f"undergoes a change of control without its consent."
    )
    f.cite(f"The memo cites {path} for the {short} change-of-control termination right.")
    f.quantify(
        f"The memo states the annual fees at risk under the {short} agreement ({money(fees)}).",
        fees,
        0.02,
        evidence=fee_clause,
    )
    f.next_step(
        f"The memo recommends obtaining {short}'s consent or waiver before closing.", [OBTAIN, CONSENT]
    )


def anti_assignment(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    clause = (
        "Neither party may assign or transfer this Agreement, in whole or in part, whether voluntarily, by operation "
        f"of law, by merger or otherwise, without the prior written consent of the other party; a merger or "
        f"consolidation of the Company shall be deemed an assignment requiring the consent of {short}, and any "
        "purported assignment in violation of this Section shall be null and void."
    )
    path, _ = filed_agreement(
        ctx,
        party,
        "intellectual_property",
        "Technology License Agreement",
        "Licensor",
        [("Assignment", clause)],
        stem="technology_license",
        sub=f"licenses_in/{party.slug}",
    )
    f = Finding(ctx, iid, "anti_assignment", short, clause, path)
    f.identify(
        f"The memo flags that the {short} license cannot be assigned (including by merger "
        f"or operation of law) without {short}'s consent."
    )
    f.cite(f"The memo cites {path} for the {short} anti-assignment clause.")
    f.next_step(f"The memo recommends obtaining {short}'s consent to the transaction.", [OBTAIN, CONSENT])


def exclusivity_affiliates(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    product = ctx.rng.choice(ctx.target["products"])
    clause = (
        f"During the Term and for two (2) years thereafter, the Company shall not, and shall cause its Affiliates "
        f"not to, directly or indirectly develop, market or sell any {product} that compete with the Products in the "
        f"Territory, {short} shall be the exclusive distributor of the Products, and for purposes of this Section "
        f'"Affiliates" includes any person that controls the Company from time to time.'
    )
    title = "Exclusive Distribution Agreement"
    planted = [("Exclusivity", clause)]
    path, _ = filed_agreement(
        ctx, party, "material_contracts", title, "Distributor", planted, stem="distribution_agreement"
    )
    f = Finding(ctx, iid, "exclusivity_affiliates", short, clause, path)
    f.identify(
        f"The memo flags that the exclusivity / non-compete in the {short} distribution "
        "agreement binds the Company's affiliates, and so would bind the buyer after closing."
    )
    f.cite(f"The memo cites {path} for the {short} exclusivity covenant.")
    f.next_step(
        f"The memo recommends negotiating a carve-out for the buyer's group or a waiver from {short}.",
        [["carve out", "carveout", "waiver", "release", "amend", "renegotiat"]],
    )


def mfn(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    clause = (
        f"The Company covenants that the prices charged to {short} shall be no less favorable than the prices "
        f"charged to any other customer for the same or similar products, and if the Company offers more favorable "
        f"pricing to any other customer it shall promptly extend such pricing to {short} retroactively to the date "
        f"first offered and refund any difference."
    )
    path, _ = filed_agreement(ctx, party, "customers", "Supply Agreement", "Customer", [("Pricing", clause)])
    f = Finding(ctx, iid, "mfn", short, clause, path)
    f.identify(
        f"The memo flags the most-favoured-customer (MFN) pricing clause in the {short} supply agreement."
    )
    f.cite(f"The memo cites {path} for the {short} MFN clause.")
    f.next_step(
        f"The memo recommends reviewing pricing to other customers for MFN exposure or "
        f"renegotiating the {short} clause.",
        [["review", "assess", "analy", "renegotiat", "waiver", "amend", "quantify"]],
    )


def uncapped_indemnity(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    clause = (
        f"Notwithstanding anything to the contrary in this Agreement, the obligations of the Company to indemnify, "
        f"defend and hold harmless {short} and its Affiliates under this Section shall not be subject to any "
        f"limitation of liability, cap or deductible set forth in this Agreement or otherwise."
    )
    planted = [("Indemnification", clause)]
    path, _ = filed_agreement(ctx, party, "material_contracts", "Services Agreement", "Customer", planted)
    f = Finding(ctx, iid, "uncapped_indemnity", short, clause, path)
    f.identify(f"The memo flags that the Company's indemnity to {short} is uncapped.")
    f.cite(f"The memo cites {path} for the uncapped {short} indemnity.")
    f.next_step(
        f"The memo recommends a specific indemnity, escrow or insurance for the {short} "
        "exposure, or renegotiating a cap.",
        [
            phrases(
                "specific indemnity; special indemnity; escrow; insurance; renegotiat; negotiate a cap; seek a cap"
            )
        ],
    )


def lease_landlord_consent(ctx: Ctx, iid: str) -> None:
    short, legal, s = ctx.counterparty()
    rent = ctx.rng.randrange(8, 120) * 10_000
    city = ctx.rng.choice(
        ["Austin", "Columbus", "Reno", "Charlotte", "Tempe", "Raleigh", "Fremont", "Louisville"]
    )
    clause = (
        "Tenant shall not assign this Lease or sublet all or any part of the Premises without the prior written "
        f"consent of {short}, which Landlord may withhold in its sole discretion, and any transfer of a controlling "
        "interest in Tenant, whether by merger, sale of stock or operation of law, shall be deemed an assignment "
        "requiring such consent."
    )
    rent_clause = f"Annual base rent for the Premises is {money(rent)}, payable in equal monthly instalments in advance."
    title = "Lease Agreement"
    text, _ = agreement(
        ctx,
        title,
        legal,
        "Landlord",
        ctx.date(),
        [("Rent", rent_clause), ("Assignment and Subletting", clause)],
        recital=f"Landlord owns the building located in {city}",
    )
    site = slug(f"{city} facility")
    path = ctx.add(
        "real_estate", f"{site}_{s}", f"lease_{s}.txt", f"Lease - {city} ({short})", text, "agreement"
    )
    f = Finding(ctx, iid, "lease_landlord_consent", short, clause, path)
    f.identify(
        f"The memo flags that the {city} lease requires the landlord {short}'s consent to "
        "a transfer of control of the tenant."
    )
    f.cite(f"The memo cites {path} for the {short} lease consent requirement.")
    f.next_step(
        f"The memo recommends obtaining {short}'s consent (or an estoppel) before closing.",
        [OBTAIN, ["consent", "estoppel"]],
    )


def amendment_coc(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    title = "Component Supply Agreement"
    dates = ctx.date_pair()
    breach = (
        f"Either party may terminate this Agreement for material breach by the other party that "
        f"remains uncured for sixty (60) days after written notice describing the breach in "
        f"reasonable detail, delivered to {short} or the Company as applicable."
    )
    planted = [("Term and Termination", breach)]
    opath, nums = filed_agreement(ctx, party, "suppliers", title, "Supplier", planted, date=dates[0])
    added = (
        f'Section {nums["Term and Termination"]} of the Agreement is amended by adding at the end: "In addition, '
        f"{short} may terminate this Agreement immediately upon written notice if the Company undergoes a Change "
        f'of Control, meaning a merger or sale of more than fifty percent (50%) of its voting securities."'
    )
    pricing = (
        f"The pricing table in Schedule A is replaced by the pricing table attached to this Amendment, effective "
        f"from the first day of the next calendar quarter for all orders placed with {short}."
    )
    apath = filed_amendment(ctx, party, "suppliers", 2, title, dates, [pricing, added])
    # the right lives in the amendment: identify, cite and next step point there
    f = Finding(ctx, iid, "amendment_coc", short, added, apath)
    f.identify(f"The memo flags that {short} may terminate the supply agreement on a change of control.")
    f.cite(f"The memo cites Amendment No. 2 ({apath}) as the source of the {short} termination right.")
    f.connect(
        f"The memo connects Amendment No. 2 with the original {short} supply agreement "
        f"({opath}): the change-of-control right was added by the amendment.",
        [opath, apath],
        any_of=[["amend"]],
    )
    f.next_step(f"The memo recommends obtaining {short}'s consent or waiver.", [OBTAIN, CONSENT])


def missing_side_letter(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    rebate = ctx.rng.randrange(4, 120) * 25_000
    entire = (
        f"This Agreement constitutes the entire agreement between the Company and {short} with "
        "respect to its subject matter and supersedes all prior proposals and understandings."
    )
    cpath, _ = filed_agreement(
        ctx, party, "customers", "Customer Agreement", "Customer", [("Entire Agreement", entire)]
    )
    sl_date, mdate = ctx.date_pair()
    item = (
        f"The Chief Executive Officer reported on the side letter entered into with {short} on {sl_date}, under "
        f"which the Company agreed to pay {short} a volume rebate of {money(rebate)} and granted {short} a right "
        "of first refusal on future product lines; after discussion the Board ratified the side letter."
    )
    mpath = filed_minutes(ctx, mdate, [item])
    # the side letter itself is not in the room: the minutes are the evidence
    f = Finding(ctx, iid, "missing_side_letter", short, item, mpath)
    f.identify(
        f"The memo flags the {short} side letter (rebate and right of first refusal) ratified by the board."
    )
    f.absence(
        f"The memo notes that the {short} side letter is not in the data room.",
        [["side letter"], NOT_IN_ROOM],
        [mpath],
    )
    f.cite(f"The memo cites the board minutes {mpath} that refer to the {short} side letter.")
    f.quantify(f"The memo states the {short} rebate ({money(rebate)}).", rebate, 0.02)
    f.connect(
        f"The memo connects the side letter in the minutes with the {short} customer "
        f"agreement ({cpath}), whose entire-agreement clause does not reflect it.",
        [mpath, cpath],
    )
    f.next_step(
        f"The memo recommends requesting a copy of the {short} side letter.",
        [["request", "obtain a copy", "obtain the side letter", "produce", "ask for"]],
    )


def fee_documents(ctx: Ctx, party: Party, fees: int, stated: int) -> tuple[str, str, str, str]:
    """A customer agreement stating ``fees`` a year, and the finance team's revenue schedule stating ``stated``
    for it, each among ordinary text: (agreement path, schedule path, fee clause, schedule line)."""
    short = party.short
    title = "Subscription Services Agreement"
    fee_clause = (
        f"The Fees payable by {short} under this Agreement for each Contract Year are {money(fees)}, "
        "invoiced annually in advance."
    )
    cpath, _ = filed_agreement(
        ctx, party, "customers", title, "Customer", [("Fees", fee_clause)], stem="subscription_agreement"
    )
    line = f"The customer ledger records subscription fees from {short} of {money(stated)} for the current contract year."
    text = report(
        ctx,
        f"Customer revenue schedule - {short}",
        f"Prepared by the Company's finance team from the customer ledger for {short}.",
        planted=[("Contract revenue", line)],
        chars=max(1200, ctx.size() // 3),
        party=short,
    )
    rpath = ctx.add(
        "financial_statements",
        "revenue_schedules",
        f"revenue_schedule_{party.slug}.txt",
        f"Revenue schedule - {short}",
        text,
        "report",
    )
    return cpath, rpath, fee_clause, line


def value_conflict(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    fees = ctx.rng.randrange(20, 400) * 25_000
    # the schedule is off by a quarter to a half either way: a figure no rounding explains
    stated = round(fees * ctx.rng.choice([0.5, 0.6, 0.75, 1.25, 1.4, 1.5]) / 25_000) * 25_000
    cpath, rpath, fee_clause, line = fee_documents(ctx, party, fees, stated)
    f = Finding(ctx, iid, "value_conflict", short, fee_clause, cpath)
    f.identify(
        f"The memo flags that the annual fees in the {short} agreement and in the revenue schedule "
        "do not match."
    )
    f.conflict(
        f"The memo sets both figures side by side, citing both documents: {money(fees)} a year in the agreement "
        f"({cpath}) against {money(stated)} in the revenue schedule ({rpath}).",
        [fees, stated],
        [cpath, rpath],
        f"{fee_clause} | {line}",
    )
    f.next_step(
        f"The memo recommends reconciling the {short} fees with management before relying on either figure.",
        [phrases("reconcil; confirm; clarify; verify; investigate")],
    )
