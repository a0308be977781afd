"""Decoys: documents that look like a planted issue but are resolved elsewhere in the room.

A clause deleted by a later amendment, a consent already given, a loan already
repaid, a suit dismissed, a permit renewed, a side letter the minutes mention
that is filed in the room (its trap fails a memo that calls it missing: absence
must be checked against the room, not assumed), a customer agreement and a
revenue schedule that state the same fees (its trap fails a memo that calls
them inconsistent: a conflict must be found by comparing, not assumed). Each
decoy writes the apparent issue and the document that resolves it, and adds
one trap criterion that fails a memo flagging the issue as live. Except for
those two claims, which no document makes, the paragraph that states the
apparent issue always holds every field of its trap, so a memo that pastes
the room verbatim fails it.
"""

from __future__ import annotations

from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.criteria import trap
from pipeline.rooms.synthetic.documents import (
    complaint,
    filed_agreement,
    filed_amendment,
    filed_letter,
    filed_minutes,
    permit_letter,
    report,
)
from pipeline.rooms.synthetic.issues.contracts import fee_documents
from pipeline.rooms.synthetic.templates import AGENCIES_ENV, money


def _coc_clause(short: str) -> str:
    return (
        f"{short} may terminate this Agreement upon written notice if the Company undergoes a Change of Control "
        f"without the prior written consent of {short}."
    )


def decoy_coc_deleted(ctx: Ctx, did: str) -> None:
    party = ctx.counterparty()
    short = party.short
    title = "Reseller Agreement"
    dates = ctx.date_pair()
    planted = [("Termination", _coc_clause(short))]
    opath, nums = filed_agreement(ctx, party, "material_contracts", title, "Reseller", planted, date=dates[0])
    deletion = (
        f"Section {nums['Termination']} of the Agreement (termination by {short} upon a Change of Control) is "
        "hereby deleted in its entirety and shall be of no further force or effect."
    )
    apath = filed_amendment(ctx, party, "material_contracts", 1, title, dates, [deletion])
    trap(
        ctx,
        did,
        "decoy_coc_deleted",
        f"The memo does not flag the {short} change-of-control termination "
        f"right as live: Amendment No. 1 ({apath}) deleted it.",
        entity=short,
        forbidden=["deleted", "removed", "no longer", "struck", "eliminated", "no further force"],
        evidence=deletion,
        evidence_paths=[opath, apath],
    )


def decoy_consent_waived(ctx: Ctx, did: str) -> None:
    party = ctx.counterparty()
    short = party.short
    title = "Master Purchase Agreement"
    odate, wdate = ctx.date_pair()
    planted = [("Termination", _coc_clause(short))]
    opath, nums = filed_agreement(ctx, party, "customers", title, "Customer", planted, date=odate)
    waiver = (
        f"{short} hereby irrevocably consents to the proposed acquisition of the Company by {ctx.deal['buyer']} "
        f"and waives any right to terminate the Agreement under Section {nums['Termination']} arising from "
        "that Change of Control."
    )
    subject = f"Consent and waiver - {title}"
    lpath = filed_letter(ctx, party, "customers", wdate, subject, waiver, "Consent and waiver")
    trap(
        ctx,
        did,
        "decoy_consent_waived",
        f"The memo does not flag the {short} change-of-control consent as "
        f"outstanding: {short} already consented and waived it ({lpath}).",
        entity=short,
        forbidden=["waive", "already consented", "has consented", "irrevocably consent", "consented"],
        evidence=waiver,
        evidence_paths=[opath, lpath],
    )


def decoy_debt_repaid(ctx: Ctx, did: str) -> None:
    party = ctx.counterparty()
    short = party.short
    clause = (
        f"The occurrence of a Change of Control shall constitute an Event of Default, upon which {short} may "
        "declare all Obligations immediately due and payable."
    )
    title = "Loan and Security Agreement"
    odate, pdate = ctx.date_pair()
    opath, _ = filed_agreement(
        ctx, party, "financing", title, "Lender", [("Events of Default", clause)], date=odate
    )
    payoff = (
        f"{short} confirms that all Obligations under the {title} have been repaid and paid in full, that the "
        "agreement is terminated and that all liens securing the Obligations are released."
    )
    lpath = filed_letter(ctx, party, "financing", pdate, "Payoff confirmation", payoff, "Payoff letter")
    trap(
        ctx,
        did,
        "decoy_debt_repaid",
        f"The memo does not flag the {short} change-of-control default as "
        f"live: the loan was repaid and terminated ({lpath}).",
        entity=short,
        forbidden=["repaid", "paid in full", "payoff", "pay off", "terminated", "released", "discharged"],
        evidence=payoff,
        evidence_paths=[opath, lpath],
    )


def decoy_litigation_dismissed(ctx: Ctx, did: str) -> None:
    short, legal, s = ctx.counterparty()
    claimed = ctx.rng.randrange(10, 600) * 50_000
    text, _ = complaint(ctx, legal, short, claimed, "Superior Court of the State of California")
    cpath = ctx.add(
        "litigation", s, f"complaint_{s}.txt", f"Complaint - {short} v. Company", text, "pleading"
    )
    order = (
        f"Pursuant to the stipulation of the parties, the action brought by {short} against the Company is "
        "dismissed with prejudice, each party to bear its own costs and fees."
    )
    otext = report(
        ctx,
        "Order of Dismissal With Prejudice",
        f"{legal} v. {ctx.t_legal}.",
        planted=[("Order", order)],
        chars=max(1200, ctx.size() // 3),
        party=short,
    )
    opath = ctx.add(
        "litigation", s, f"order_of_dismissal_{s}.txt", f"Order of dismissal - {short}", otext, "order"
    )
    trap(
        ctx,
        did,
        "decoy_litigation_dismissed",
        f"The memo does not flag the {short} lawsuit as pending: it was dismissed with prejudice ({opath}).",
        entity=short,
        amounts=[(claimed, 0.02)],
        forbidden=["dismiss", "settled", "withdrawn", "resolved"],
        evidence=order,
        evidence_paths=[cpath, opath],
    )


def decoy_permit_renewed(ctx: Ctx, did: str) -> None:
    agency = ctx.rng.choice(AGENCIES_ENV)
    pid = ctx.permit_id()
    expiry, renewed = ctx.date_pair()
    notice = (
        f"Our records indicate that Permit No. {pid} issued to the Company's facility expired on {expiry}."
    )
    npath = permit_letter(
        ctx,
        agency,
        pid,
        expiry,
        f"Permit No. {pid}",
        notice,
        "agency_notice",
        f"Agency notice - Permit {pid}",
    )
    grant = (
        f"Permit No. {pid} is hereby renewed for a term of five (5) years from the date of this letter, on the "
        "conditions set out in the attached schedule."
    )
    subject = f"Renewal of Permit No. {pid}"
    gpath = permit_letter(
        ctx, agency, pid, renewed, subject, grant, "permit_renewal", f"Permit renewal - {pid}"
    )
    trap(
        ctx,
        did,
        "decoy_permit_renewed",
        f"The memo does not flag Permit {pid} as expired: it was renewed ({gpath}).",
        entity=pid,
        forbidden=["renew", "reissued", "reinstated"],
        evidence=grant,
        evidence_paths=[npath, gpath],
    )


def decoy_side_letter_filed(ctx: Ctx, did: str) -> None:
    party = ctx.counterparty()
    short = party.short
    rebate = ctx.rng.randrange(4, 120) * 25_000
    sl_date, mdate = ctx.date_pair()
    item = (
        f"The Chief Executive Officer reported on the side letter entered into with {short} on {sl_date}, under "
        f"which the Company agreed to pay {short} a volume rebate of {money(rebate)}; after discussion the Board "
        "ratified the side letter."
    )
    mpath = filed_minutes(ctx, mdate, [item])
    letter_text = (
        f"This side letter supplements the customer agreement between the Company and {short}. The Company shall "
        f"pay {short} a volume rebate of {money(rebate)} for each contract year in which {short}'s orders exceed "
        "the agreed volume, payable within thirty days after the end of that contract year."
    )
    lpath = filed_letter(ctx, party, "customers", sl_date, "Side letter", letter_text, "Side letter")
    trap(
        ctx,
        did,
        "decoy_side_letter_filed",
        f"The memo does not call the {short} side letter missing: it is in the data room ({lpath}).",
        entity=short,
        forbidden=["is in the data room", "is in the room", "on file", "filed", "provided at"],
        evidence=letter_text,
        evidence_paths=[mpath, lpath],
    )


def decoy_fees_agree(ctx: Ctx, did: str) -> None:
    party = ctx.counterparty()
    short = party.short
    fees = ctx.rng.randrange(20, 400) * 25_000
    cpath, rpath, fee_clause, line = fee_documents(ctx, party, fees, fees)
    trap(
        ctx,
        did,
        "decoy_fees_agree",
        f"The memo does not call the {short} fees inconsistent: the agreement ({cpath}) and the revenue "
        f"schedule ({rpath}) both state {money(fees)}.",
        entity=short,
        forbidden=["consistent with", "the same figure", "identical", "equal to"],
        evidence=line,
        evidence_paths=[cpath, rpath],
    )
