"""Planted liabilities: debt that accelerates on the deal, claims, tax assessments, permits, data breaches.

Each builder writes the document that states the exposure (a credit
agreement, a complaint, an agency letter, an incident report), then the
issue's criteria through ``Finding``; every one of them has an amount to
quantify.
"""

from __future__ import annotations

from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.criteria import Finding, phrases
from pipeline.rooms.synthetic.documents import complaint, filed_agreement, letter, permit_letter, report
from pipeline.rooms.synthetic.templates import AGENCIES_ENV, TAX_AGENCIES, money, slug


def debt_coc_default(ctx: Ctx, iid: str) -> None:
    party = ctx.counterparty()
    short = party.short
    principal = ctx.rng.randrange(40, 800) * 100_000
    loans = (
        f"Subject to the terms of this Agreement, {short} has made term loans to the Borrower in an aggregate "
        f"principal amount of {money(principal)}, all of which remains outstanding as of the Effective Date."
    )
    clause = (
        f"The occurrence of a Change of Control shall constitute an immediate Event of Default, upon which {short}, "
        "as administrative agent, may declare all Obligations immediately due and payable, and the Borrower shall "
        "prepay the outstanding Term Loans in full together with a prepayment premium of two percent (2%) of the "
        "principal amount so prepaid."
    )
    planted = [("Term Loans", loans), ("Events of Default", clause)]
    path, _ = filed_agreement(ctx, party, "financing", "Credit Agreement", "Lender", planted)
    f = Finding(ctx, iid, "debt_coc_default", short, clause, path)
    f.identify(
        f"The memo flags that a change of control is an event of default under the {short} "
        "credit agreement, triggering acceleration and prepayment."
    )
    f.cite(f"The memo cites {path} for the {short} change-of-control default.")
    f.quantify(
        f"The memo states the {short} loans to be prepaid ({money(principal)}).",
        principal,
        0.03,
        evidence=loans,
    )
    f.next_step(
        f"The memo recommends a payoff letter / refinancing at closing or a lender consent from {short}.",
        [phrases("payoff letter; pay off letter; refinanc; lender consent; consent of the lender; waiver")],
    )


def pending_litigation(ctx: Ctx, iid: str) -> None:
    short, legal, s = ctx.counterparty()
    claimed = ctx.rng.randrange(10, 600) * 50_000
    text, claim = complaint(
        ctx, legal, short, claimed, "United States District Court for the District of Delaware"
    )
    path = ctx.add("litigation", s, f"complaint_{s}.txt", f"Complaint - {short} v. Company", text, "pleading")
    f = Finding(ctx, iid, "pending_litigation", short, claim, path)
    f.identify(f"The memo flags the pending lawsuit brought by {short} against the Company.")
    f.cite(f"The memo cites {path} for the {short} lawsuit.")
    f.quantify(f"The memo states the amount {short} claims ({money(claimed)}).", claimed, 0.02)
    f.next_step(
        f"The memo recommends a special indemnity, escrow or reserve for the {short} "
        "claim, or an assessment by litigation counsel.",
        [
            phrases(
                "special indemnity; specific indemnity; escrow; reserve; litigation counsel; assess the merits; evaluate the merits; holdback"
            )
        ],
    )


def expired_permit(ctx: Ctx, iid: str) -> None:
    agency = ctx.rng.choice(AGENCIES_ENV)
    pid = ctx.permit_id()
    penalty = ctx.rng.randrange(2, 50) * 1_000
    expiry, sent = ctx.date_pair()
    notice = (
        f"Our records indicate that Permit No. {pid} issued to the Company's facility expired on "
        f"{expiry} and that the facility has continued to operate without a valid permit, which may subject "
        f"the Company to civil penalties of up to {money(penalty)} per day of violation."
    )
    path = permit_letter(
        ctx, agency, pid, sent, f"Permit No. {pid}", notice, "agency_notice", f"Agency notice - Permit {pid}"
    )
    f = Finding(ctx, iid, "expired_permit", pid, notice, path)
    f.identify(
        f"The memo flags that environmental Permit {pid} has expired while the facility keeps operating."
    )
    f.cite(f"The memo cites {path} for the expired Permit {pid}.")
    f.quantify(
        f"The memo states the daily penalty exposure for Permit {pid} ({money(penalty)} per day).",
        penalty,
        0.02,
    )
    f.next_step(
        f"The memo recommends renewing Permit {pid} (or a closing condition to that effect).",
        [["renew", "reapply", "new permit", "closing condition"]],
    )


def unreported_breach(ctx: Ctx, iid: str) -> None:
    vendor, _, _ = ctx.counterparty()
    records = ctx.rng.randrange(2_000, 400_000)
    date = ctx.date()
    finding = (
        f"On {date} the security team detected unauthorized access to a customer database hosted by {vendor}, and "
        f"approximately {records:,} customer records, including names, email addresses and hashed passwords, were "
        "exfiltrated; as of the date of this report no notice has been given to affected individuals or to any "
        "regulator, and management decided to defer notification."
    )
    intro = f"Internal incident report prepared for the Audit Committee of {ctx.t_legal}. Privileged and confidential."
    text = report(ctx, "Security Incident Report", intro, planted=[("Findings", finding)])
    filename = f"incident_report_{slug(date)}.txt"
    path = ctx.add("data_privacy", "incidents", filename, f"Security incident {date}", text, "report")
    f = Finding(ctx, iid, "unreported_breach", vendor, finding, path)
    f.identify(
        f"The memo flags the {vendor}-hosted database breach of {date} that was never "
        "notified to individuals or regulators."
    )
    f.cite(f"The memo cites {path} for the unreported data breach.")
    f.quantify(f"The memo states the number of records exposed (about {records:,}).", records, 0.05)
    f.next_step(
        "The memo recommends assessing notification obligations with privacy counsel / "
        "notifying regulators, or a specific indemnity.",
        [
            phrases(
                "notify; privacy counsel; breach counsel; forensic; regulator; specific indemnity; special indemnity"
            )
        ],
    )


def tax_assessment(ctx: Ctx, iid: str) -> None:
    agency = ctx.rng.choice(TAX_AGENCIES)
    amount = ctx.rng.randrange(5, 300) * 10_000
    y = ctx.rng.randrange(2017, 2021)
    finding = (
        f"Based on the examination of the Company's returns for tax years {y} through {y + 2}, the {agency} "
        f"proposes an assessment of additional tax, penalties and interest totaling {money(amount)}, arising "
        "from the disallowance of research credits and the apportionment of sales receipts."
    )
    text = letter(
        ctx,
        agency,
        ctx.t_legal,
        ctx.date(),
        f"Notice of Proposed Assessment, tax years {y}-{y + 2}",
        [finding],
        ctx.t_short,
    )
    path = ctx.add(
        "tax",
        f"audits/{y}",
        f"notice_of_proposed_assessment_{slug(agency)}.txt",
        f"Proposed assessment - {agency}",
        text,
        "letter",
    )
    f = Finding(ctx, iid, "tax_assessment", agency, finding, path)
    f.identify(f"The memo flags the proposed tax assessment by the {agency}.")
    f.cite(f"The memo cites {path} for the proposed assessment.")
    f.quantify(f"The memo states the amount proposed ({money(amount)}).", amount, 0.02)
    f.next_step(
        "The memo recommends a tax indemnity, escrow or reserve for the assessment.",
        [["tax indemnity", "specific indemnity", "special indemnity", "escrow", "reserve", "holdback"]],
    )
