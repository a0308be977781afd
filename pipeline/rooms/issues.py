"""Planted diligence issues and decoys: the documents that carry them and their rubric.

Each builder writes one issue's documents into the room under construction
(``Ctx``) with the issue's clause buried among ordinary sections, and adds the
issue's atomic criteria (identify / cite / quantify / connect / absence /
next_step). Decoy builders write documents that look like an issue but are
resolved elsewhere in the room (a clause deleted by a later amendment, a
waiver already granted, a loan already repaid, a suit dismissed, a permit
renewed) and add a trap criterion that fails a memo flagging them. The
paragraph of the decoy document that states the apparent issue always holds
every field of its trap, so a memo that pastes the room verbatim fails it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pipeline.rooms.model import CATEGORIES, Amount, Criterion, Document
from pipeline.rooms.templates import (
    AGENCIES_ENV,
    MINUTES_SENTENCES,
    PLEADING_HEADINGS,
    REPORT_HEADINGS,
    ROLES,
    TAX_AGENCIES,
    Names,
    Writer,
    definitions,
    money,
    signature_block,
    slug,
)

COC = ["change of control", "change in control"]
OBTAIN = ["obtain", "seek", "request", "secure", "get"]
CONSENT = ["consent", "waiver"]


def folder(category: str) -> str:
    """Numbered top folder of a category, e.g. material_contracts -> 03_material_contracts."""
    return f"{CATEGORIES.index(category) + 1:02d}_{category}"


@dataclass
class Ctx:
    """A room under construction."""

    rng: random.Random
    names: Names
    writer: Writer
    target: dict
    deal: dict
    tokens_per_document: int
    docs: list[Document] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    criteria: list[Criterion] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    limit: int = 0  # number of documents the room will hold

    @property
    def t_short(self) -> str:
        return self.target["short_name"]

    @property
    def t_legal(self) -> str:
        return self.target["name"]

    def size(self) -> int:
        """Characters for the next document, spread 0.5x-1.9x of tokens_per_document.

        The mean is above 1x because letters, amendments and certificates take
        a fraction of it; rooms then average about tokens_per_document tokens.
        """
        chars = self.tokens_per_document * 4 * (0.5 + 1.4 * self.rng.random())
        # headers and signature blocks come on top of the body: about 900 characters
        return int(max(chars * 0.3, chars - 900))

    def add(self, category: str, sub: str, filename: str, title: str, text: str, kind: str) -> str:
        base = f"{folder(category)}/{sub}/{filename}" if sub else f"{folder(category)}/{filename}"
        path = base
        n = 2
        while path in self.paths:
            stem, ext = base.rsplit(".", 1)
            path = f"{stem}_{n}.{ext}"
            n += 1
        self.paths.add(path)
        self.docs.append(Document(path=path, category=category, title=title, text=text, doc_kind=kind))
        return path

    def crit(
        self,
        iid: str,
        ikind: str,
        kind: str,
        text: str,
        *,
        entities=(),
        any_of=(),
        amounts=(),
        paths=(),
        forbidden=(),
        evidence: str = "",
        evidence_paths=(),
        trap: bool = False,
    ) -> None:
        cid = f"{iid}-{kind}"
        n = 2
        while cid in self.ids:
            cid = f"{iid}-{kind}{n}"
            n += 1
        self.ids.add(cid)
        self.criteria.append(
            Criterion(
                criterion_id=cid,
                kind=kind,
                text=text,
                issue_id=iid,
                issue_kind=ikind,
                is_trap=trap,
                entities=list(entities),
                any_of=[list(g) for g in any_of],
                amounts=[Amount(float(v), tol) for v, tol in amounts],
                paths=list(paths),
                forbidden=list(forbidden),
                evidence=evidence,
                evidence_paths=list(evidence_paths or paths),
            )
        )

    def date(self) -> str:
        return self.writer.date()

    def date_pair(self) -> tuple[str, str]:
        return self.writer.date_pair()

    def person(self) -> str:
        return self.names.person()


# ---------------------------------------------------------------- document renderers
def agreement(
    ctx: Ctx,
    title: str,
    cp_legal: str,
    role: str,
    date: str,
    planted=(),
    chars: int | None = None,
    recital: str = "",
) -> tuple[str, dict[str, str]]:
    w = ctx.writer
    chars = chars or ctx.size()
    head = (
        f"{title.upper()}\n\n"
        f'Dated as of {date} (the "Effective Date"), this {title} (this "Agreement") is entered into by and between '
        f'{ctx.t_legal}, a {ctx.target["jurisdiction"]} corporation (the "Company"), and {cp_legal} ("{role}").\n\n'
        f"RECITALS\n\nWHEREAS, {recital or 'the parties wish to set out the terms on which they will do business'}; and "
        f"WHEREAS, the parties have negotiated this Agreement at arm's length with the benefit of counsel.\n\n"
        f"NOW, THEREFORE, in consideration of the mutual covenants set out below, the parties agree as follows.\n\n"
        f"1. Definitions\n\n{definitions(w, 5 if chars > 8000 else 2)}"
    )
    short = cp_legal.rsplit(" ", 1)[0]
    sig = signature_block(
        [
            (ctx.t_legal, ctx.target["ceo"], "Chief Executive Officer"),
            (cp_legal, ctx.person(), ROLES[ctx.rng.randrange(len(ROLES))]),
        ]
    )
    secs, numbers = w.sections(short, chars - len(head) - len(sig), start=2, planted=list(planted))
    return "\n\n".join([head, *secs, sig]) + "\n", numbers


def amendment(
    ctx: Ctx,
    number: int,
    title: str,
    cp_legal: str,
    date: str,
    orig_date: str,
    changes: list[str],
    chars: int | None = None,
) -> str:
    w = ctx.writer
    chars = chars or max(1200, ctx.size() // 3)
    head = (
        f"AMENDMENT NO. {number} TO {title.upper()}\n\n"
        f'This Amendment No. {number} (this "Amendment") dated {date} is made between {ctx.t_legal} (the "Company") '
        f'and {cp_legal}, and amends the {title} between them dated {orig_date} (the "Agreement").\n\n'
        "1. Amendments\n\n" + "\n\n".join(f"1.{i} {c}" for i, c in enumerate(changes, 1))
    )
    short = cp_legal.rsplit(" ", 1)[0]
    secs, _ = w.sections(short, chars - len(head), start=2)
    tail = (
        "Except as expressly amended by this Amendment, the Agreement remains unchanged and in full force "
        "and effect."
    )
    sig = signature_block(
        [
            (ctx.t_legal, ctx.target["cfo"], "Chief Financial Officer"),
            (cp_legal, ctx.person(), ROLES[ctx.rng.randrange(len(ROLES))]),
        ]
    )
    return "\n\n".join([head, *secs, tail, sig]) + "\n"


def letter(
    ctx: Ctx,
    sender: str,
    recipient: str,
    date: str,
    subject: str,
    paras: list[str],
    party: str,
    chars: int | None = None,
) -> str:
    w = ctx.writer
    chars = chars or max(1000, ctx.size() // 2)
    body = list(paras)
    size = sum(map(len, body))
    while size < chars:
        p = w.paragraph("", party)
        body.insert(ctx.rng.randrange(len(body) + 1), p)
        size += len(p)
    signer = ctx.person()
    return (
        f"{sender}\n{date}\n\nTo: {recipient}\n\nRe: {subject}\n\nDear Sir or Madam,\n\n"
        + "\n\n".join(body)
        + f"\n\nYours faithfully,\n\n/s/ {signer}\n{signer}\nfor and on behalf of {sender}\n"
    )


def report(
    ctx: Ctx,
    title: str,
    intro: str,
    planted=(),
    chars: int | None = None,
    party: str | None = None,
    headings: list[str] | None = None,
) -> str:
    chars = chars or ctx.size()
    head = f"{title.upper()}\n\n{intro}"
    secs, _ = ctx.writer.sections(
        party or ctx.t_short, chars - len(head), planted=list(planted), headings=headings or REPORT_HEADINGS
    )
    return "\n\n".join([head, *secs]) + "\n"


def minutes(ctx: Ctx, date: str, items: list[str], chars: int | None = None) -> str:
    w = ctx.writer
    chars = chars or ctx.size()
    directors = [ctx.target["ceo"], ctx.person(), ctx.person(), ctx.person()]
    body = list(items)
    size = sum(map(len, body))
    while size < chars:
        p = w.paragraph("", ctx.t_short, MINUTES_SENTENCES)
        body.insert(ctx.rng.randrange(len(body) + 1), p)
        size += len(p)
    numbered = "\n\n".join(f"{i}. {p}" for i, p in enumerate(body, 1))
    return (
        f"MINUTES OF A MEETING OF THE BOARD OF DIRECTORS OF {ctx.t_legal.upper()}\n\n"
        f"Held on {date} at the offices of the Company in {ctx.target['hq']}.\n\n"
        f"Present: {', '.join(directors)}. Also present: {ctx.target['cfo']} (Chief Financial Officer) and "
        f"{ctx.target['counsel']} (General Counsel), who acted as secretary of the meeting.\n\n"
        f"A quorum being present, {directors[0]} called the meeting to order.\n\n{numbered}\n\n"
        f"There being no further business, the meeting was adjourned.\n\n/s/ {ctx.target['counsel']}\nSecretary\n"
    )


# ---------------------------------------------------------------- issues
def _cp(ctx: Ctx) -> tuple[str, str, str]:
    short, legal = ctx.names.company()
    return short, legal, slug(short)


def coc_termination(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
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
    text, _ = agreement(
        ctx, title, legal, "Customer", ctx.date(), [("Termination", clause), ("Fees", fee_clause)]
    )
    path = ctx.add(
        "material_contracts", s, f"master_services_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    k = "coc_termination"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that the {short} {title} lets {short} terminate if the Company "
        f"undergoes a change of control without its consent.",
        entities=[short],
        any_of=[COC, ["terminat"]],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} change-of-control termination right.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the annual fees at risk under the {short} agreement ({money(fees)}).",
        entities=[short],
        amounts=[(fees, 0.02)],
        evidence=fee_clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends obtaining {short}'s consent or waiver before closing.",
        entities=[short],
        any_of=[OBTAIN, CONSENT],
        evidence=clause,
        evidence_paths=[path],
    )


def anti_assignment(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    clause = (
        "Neither party may assign or transfer this Agreement, in whole or in part, whether voluntarily, by operation "
        f"of law, by merger or otherwise, without the prior written consent of the other party; a merger or "
        f"consolidation of the Company shall be deemed an assignment requiring the consent of {short}, and any "
        "purported assignment in violation of this Section shall be null and void."
    )
    title = "Technology License Agreement"
    text, _ = agreement(ctx, title, legal, "Licensor", ctx.date(), [("Assignment", clause)])
    path = ctx.add(
        "intellectual_property",
        f"licenses_in/{s}",
        f"technology_license_{s}.txt",
        f"{title} - {short}",
        text,
        "agreement",
    )
    k = "anti_assignment"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that the {short} license cannot be assigned (including by merger "
        f"or operation of law) without {short}'s consent.",
        entities=[short],
        any_of=[["assign"], ["consent", "operation of law", "merger", "null and void"]],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} anti-assignment clause.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends obtaining {short}'s consent to the transaction.",
        entities=[short],
        any_of=[OBTAIN, CONSENT],
        evidence=clause,
        evidence_paths=[path],
    )


def exclusivity_affiliates(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    product = ctx.rng.choice(ctx.target["products"])
    clause = (
        f"During the Term and for two (2) years thereafter, the Company shall not, and shall cause its Affiliates "
        f"not to, directly or indirectly develop, market or sell any {product} that compete with the Products in the "
        f"Territory, {short} shall be the exclusive distributor of the Products, and for purposes of this Section "
        f'"Affiliates" includes any person that controls the Company from time to time.'
    )
    title = "Exclusive Distribution Agreement"
    text, _ = agreement(ctx, title, legal, "Distributor", ctx.date(), [("Exclusivity", clause)])
    path = ctx.add(
        "material_contracts", s, f"distribution_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    k = "exclusivity_affiliates"
    excl = ["exclusiv", "non compet", "noncompet", "not compete", "restrictive covenant"]
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that the exclusivity / non-compete in the {short} distribution "
        "agreement binds the Company's affiliates, and so would bind the buyer after closing.",
        entities=[short],
        any_of=[excl, ["affiliate"]],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} exclusivity covenant.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends negotiating a carve-out for the buyer's group or a waiver from {short}.",
        entities=[short],
        any_of=[["carve out", "carveout", "waiver", "release", "amend", "renegotiat"]],
        evidence=clause,
        evidence_paths=[path],
    )


def mfn(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    clause = (
        f"The Company covenants that the prices charged to {short} shall be no less favorable than the prices "
        f"charged to any other customer for the same or similar products, and if the Company offers more favorable "
        f"pricing to any other customer it shall promptly extend such pricing to {short} retroactively to the date "
        f"first offered and refund any difference."
    )
    title = "Supply Agreement"
    text, _ = agreement(ctx, title, legal, "Customer", ctx.date(), [("Pricing", clause)])
    path = ctx.add("customers", s, f"supply_agreement_{s}.txt", f"{title} - {short}", text, "agreement")
    k = "mfn"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the most-favoured-customer (MFN) pricing clause in the {short} supply agreement.",
        entities=[short],
        any_of=[
            ["most favored", "most favoured", "mfn", "no less favorable", "most favourable", "best price"]
        ],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} MFN clause.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends reviewing pricing to other customers for MFN exposure or "
        f"renegotiating the {short} clause.",
        entities=[short],
        any_of=[["review", "assess", "analy", "renegotiat", "waiver", "amend", "quantify"]],
        evidence=clause,
        evidence_paths=[path],
    )


def uncapped_indemnity(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    clause = (
        f"Notwithstanding anything to the contrary in this Agreement, the obligations of the Company to indemnify, "
        f"defend and hold harmless {short} and its Affiliates under this Section shall not be subject to any "
        f"limitation of liability, cap or deductible set forth in this Agreement or otherwise."
    )
    title = "Services Agreement"
    text, _ = agreement(ctx, title, legal, "Customer", ctx.date(), [("Indemnification", clause)])
    path = ctx.add(
        "material_contracts", s, f"services_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    k = "uncapped_indemnity"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that the Company's indemnity to {short} is uncapped.",
        entities=[short],
        any_of=[
            ["indemn"],
            [
                "uncapped",
                "unlimited",
                "no cap",
                "not subject to any",
                "without limit",
                "not capped",
                "no limitation",
            ],
        ],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the uncapped {short} indemnity.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends a specific indemnity, escrow or insurance for the {short} "
        "exposure, or renegotiating a cap.",
        entities=[short],
        any_of=[
            [
                "specific indemnity",
                "special indemnity",
                "escrow",
                "insurance",
                "renegotiat",
                "negotiate a cap",
                "seek a cap",
            ]
        ],
        evidence=clause,
        evidence_paths=[path],
    )


def debt_coc_default(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
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
    title = "Credit Agreement"
    text, _ = agreement(
        ctx, title, legal, "Lender", ctx.date(), [("Term Loans", loans), ("Events of Default", clause)]
    )
    path = ctx.add("financing", s, f"credit_agreement_{s}.txt", f"{title} - {short}", text, "agreement")
    k = "debt_coc_default"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that a change of control is an event of default under the {short} "
        "credit agreement, triggering acceleration and prepayment.",
        entities=[short],
        any_of=[COC, ["default", "prepay", "accelerat", "due and payable"]],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} change-of-control default.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the {short} loans to be prepaid ({money(principal)}).",
        entities=[short],
        amounts=[(principal, 0.03)],
        evidence=loans,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends a payoff letter / refinancing at closing or a lender consent from {short}.",
        entities=[short],
        any_of=[
            [
                "payoff letter",
                "pay off letter",
                "refinanc",
                "lender consent",
                "consent of the lender",
                "waiver",
            ]
        ],
        evidence=clause,
        evidence_paths=[path],
    )


def _complaint(ctx: Ctx, plaintiff_legal: str, plaintiff: str, claimed: int, court: str) -> tuple[str, str]:
    claim = (
        f"Plaintiff {plaintiff} claims that the Company breached the parties' agreement and misappropriated "
        f"confidential information, and {plaintiff} demands judgment against the Company in an amount of not less "
        f"than {money(claimed)}, together with interest, costs and attorneys' fees."
    )
    text = report(
        ctx,
        f"Complaint - {plaintiff_legal} v. {ctx.t_legal}",
        f"IN THE {court.upper()}\n\n{plaintiff_legal}, Plaintiff, v. {ctx.t_legal}, Defendant.\n\n"
        f"Civil Action No. {ctx.rng.randrange(1, 9)}:{ctx.rng.randrange(19, 25)}-cv-"
        f"{ctx.rng.randrange(1000, 9999)}",
        planted=[("Prayer for Relief", claim)],
        party=plaintiff,
        headings=PLEADING_HEADINGS,
    )
    return text, claim


def pending_litigation(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    claimed = ctx.rng.randrange(10, 600) * 50_000
    text, claim = _complaint(
        ctx, legal, short, claimed, "United States District Court for the District of Delaware"
    )
    path = ctx.add("litigation", s, f"complaint_{s}.txt", f"Complaint - {short} v. Company", text, "pleading")
    k = "pending_litigation"
    lit = ["lawsuit", "complaint", "litigation", "suit", "claim", "action"]
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the pending lawsuit brought by {short} against the Company.",
        entities=[short],
        any_of=[lit],
        evidence=claim,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} lawsuit.",
        entities=[short],
        paths=[path],
        evidence=claim,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the amount {short} claims ({money(claimed)}).",
        entities=[short],
        amounts=[(claimed, 0.02)],
        evidence=claim,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends a special indemnity, escrow or reserve for the {short} "
        "claim, or an assessment by litigation counsel.",
        entities=[short],
        any_of=[
            [
                "special indemnity",
                "specific indemnity",
                "escrow",
                "reserve",
                "litigation counsel",
                "assess the merits",
                "evaluate the merits",
                "holdback",
            ]
        ],
        evidence=claim,
        evidence_paths=[path],
    )


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
    text, _ = agreement(
        ctx,
        title,
        f"{name}, an individual",
        "Executive",
        ctx.date(),
        [("Compensation", comp), ("Transaction Bonus", clause)],
        recital=f"the Company wishes to employ {name} as its {role}",
    )
    s = slug(name)
    path = ctx.add(
        "employment",
        f"executives/{s}",
        f"employment_agreement_{s}.txt",
        f"{title} - {name}",
        text,
        "agreement",
    )
    k = "exec_cic_payment"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the single-trigger change-in-control payment owed to {name}.",
        entities=[name],
        any_of=[COC, ["payment", "bonus", "severance", "single trigger", "accelerat", "vest"]],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for {name}'s change-in-control payment.",
        entities=[name],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the amount of {name}'s change-in-control payment ({money(payment)}).",
        entities=[name],
        amounts=[(payment, 0.02)],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends treating {name}'s payment as a transaction expense in the "
        "price / funds flow, or a 280G analysis, or seeking a waiver.",
        entities=[name],
        any_of=[["280g", "transaction expense", "funds flow", "purchase price", "waive", "budget", "escrow"]],
        evidence=clause,
        evidence_paths=[path],
    )


def piia(ctx: Ctx, name: str, date: str) -> tuple[str, str]:
    """A signed invention assignment agreement (ordinary document; also a building block of an issue)."""
    clause = (
        f"{name} hereby assigns to the Company all right, title and interest in and to all Inventions "
        "conceived or reduced to practice during the period of employment, and agrees to execute all "
        "documents reasonably requested to perfect such assignment."
    )
    title = "Proprietary Information and Inventions Assignment Agreement"
    text, _ = agreement(
        ctx,
        title,
        f"{name}, an individual",
        "Employee",
        date,
        [("Assignment of Inventions", clause)],
        chars=max(1500, ctx.size() // 2),
    )
    s = slug(name)
    return ctx.add(
        "employment", f"invention_assignments/{s}", f"piia_{s}.txt", f"PIIA - {name}", text, "agreement"
    ), clause


def missing_ip_assignment(ctx: Ctx, iid: str) -> None:
    inventors = [ctx.person() for _ in range(3)]
    missing = inventors[-1]
    number = f"{ctx.rng.randrange(10, 12)},{ctx.rng.randrange(100, 999)},{ctx.rng.randrange(100, 999)}"
    product = ctx.rng.choice(ctx.target["products"])
    listing = (
        f"Inventors: {inventors[0]}, {inventors[1]} and {missing}, each of whom was an engineer employed by the "
        f"Company when the claimed invention relating to {product} was conceived."
    )
    text = report(
        ctx,
        f"United States Patent No. {number}",
        f"United States Patent No. {number}, issued {ctx.date()}. Applicant and assignee of record: "
        f"{ctx.t_legal}.",
        planted=[("Inventorship", listing)],
    )
    ppath = ctx.add(
        "intellectual_property",
        "patents",
        f"us_patent_{number.replace(',', '')}.txt",
        f"US Patent {number}",
        text,
        "patent",
    )
    assigned = [piia(ctx, n, ctx.date())[0] for n in inventors[:2]]
    k = "missing_ip_assignment"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that inventor {missing} on US Patent {number} has no invention assignment on file.",
        entities=[missing],
        any_of=[["assign", "piia"], ["patent", "invent"]],
        evidence=listing,
        evidence_paths=[ppath],
    )
    ctx.crit(
        iid,
        k,
        "absence",
        f"The memo notes that no PIIA / invention assignment signed by {missing} is in the "
        f"employment records, although the co-inventors signed theirs.",
        entities=[missing],
        any_of=[
            [
                "missing",
                "absent",
                "no piia",
                "no invention assignment",
                "no assignment",
                "not signed",
                "never signed",
                "lacks",
                "lacking",
                "without",
                "not located",
                "not found",
                "not included",
                "unsigned",
                "no signed",
            ],
            ["assign", "piia"],
        ],
        evidence=listing,
        evidence_paths=[ppath, *assigned],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites the patent {ppath} listing {missing} as an inventor.",
        entities=[missing],
        paths=[ppath],
        evidence=listing,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends obtaining a confirmatory (nunc pro tunc) assignment from "
        f"{missing} before closing.",
        entities=[missing],
        any_of=[
            [
                "confirmatory assignment",
                "obtain an assignment",
                "obtain assignment",
                "execute an assignment",
                "require assignment",
                "require an assignment",
                "nunc pro tunc",
                "obtain a signed",
                "assignment from",
            ]
        ],
        evidence=listing,
        evidence_paths=[ppath],
    )


def lease_landlord_consent(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
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
    k = "lease_landlord_consent"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that the {city} lease requires the landlord {short}'s consent to "
        "a transfer of control of the tenant.",
        entities=[short],
        any_of=[
            ["consent"],
            [
                "assign",
                "controlling interest",
                "change of control",
                "change in control",
                "transfer",
                "landlord",
            ],
        ],
        evidence=clause,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the {short} lease consent requirement.",
        entities=[short],
        paths=[path],
        evidence=clause,
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends obtaining {short}'s consent (or an estoppel) before closing.",
        entities=[short],
        any_of=[OBTAIN, ["consent", "estoppel"]],
        evidence=clause,
        evidence_paths=[path],
    )


def _permit_id(ctx: Ctx) -> str:
    while True:
        pid = f"{ctx.rng.choice(['AQ', 'WD', 'SW', 'HW'])}-{ctx.rng.randrange(10000, 99999)}"
        if pid not in ctx.ids:  # permit numbers are entities of criteria: keep them unique in the room
            ctx.ids.add(pid)
            return pid


def expired_permit(ctx: Ctx, iid: str) -> None:
    agency = ctx.rng.choice(AGENCIES_ENV)
    pid = _permit_id(ctx)
    penalty = ctx.rng.randrange(2, 50) * 1_000
    expiry, sent = ctx.date_pair()
    notice = (
        f"Our records indicate that Permit No. {pid} issued to the Company's facility expired on "
        f"{expiry} and that the facility has continued to operate without a valid permit, which may subject "
        f"the Company to civil penalties of up to {money(penalty)} per day of violation."
    )
    text = letter(ctx, agency, ctx.t_legal, sent, f"Permit No. {pid}", [notice], ctx.t_short)
    path = ctx.add(
        "environmental",
        "permits",
        f"agency_notice_{slug(pid)}.txt",
        f"Agency notice - Permit {pid}",
        text,
        "letter",
    )
    k = "expired_permit"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that environmental Permit {pid} has expired while the facility keeps operating.",
        entities=[pid],
        any_of=[["expired", "expiration", "lapsed", "without a valid permit"]],
        evidence=notice,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the expired Permit {pid}.",
        entities=[pid],
        paths=[path],
        evidence=notice,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the daily penalty exposure for Permit {pid} ({money(penalty)} per day).",
        entities=[pid],
        amounts=[(penalty, 0.02)],
        evidence=notice,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends renewing Permit {pid} (or a closing condition to that effect).",
        entities=[pid],
        any_of=[["renew", "reapply", "new permit", "closing condition"]],
        evidence=notice,
        evidence_paths=[path],
    )


def unreported_breach(ctx: Ctx, iid: str) -> None:
    vendor, _, _ = _cp(ctx)
    records = ctx.rng.randrange(2_000, 400_000)
    date = ctx.date()
    finding = (
        f"On {date} the security team detected unauthorized access to a customer database hosted by {vendor}, and "
        f"approximately {records:,} customer records, including names, email addresses and hashed passwords, were "
        "exfiltrated; as of the date of this report no notice has been given to affected individuals or to any "
        "regulator, and management decided to defer notification."
    )
    text = report(
        ctx,
        "Security Incident Report",
        f"Internal incident report prepared for the Audit Committee of "
        f"{ctx.t_legal}. Privileged and confidential.",
        planted=[("Findings", finding)],
    )
    path = ctx.add(
        "data_privacy",
        "incidents",
        f"incident_report_{slug(date)}.txt",
        f"Security incident {date}",
        text,
        "report",
    )
    k = "unreported_breach"
    breach = ["breach", "unauthorized access", "security incident", "exfiltrat"]
    unrep = [
        "not notified",
        "no notice",
        "not been notified",
        "unreported",
        "not reported",
        "without notif",
        "no notification",
        "not disclosed",
        "failed to notify",
        "defer notification",
        "not been reported",
        "not given notice",
        "no notice has been",
    ]
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the {vendor}-hosted database breach of {date} that was never "
        "notified to individuals or regulators.",
        entities=[vendor],
        any_of=[breach, unrep],
        evidence=finding,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the unreported data breach.",
        entities=[vendor],
        paths=[path],
        evidence=finding,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the number of records exposed (about {records:,}).",
        entities=[vendor],
        amounts=[(records, 0.05)],
        evidence=finding,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        "The memo recommends assessing notification obligations with privacy counsel / "
        "notifying regulators, or a specific indemnity.",
        entities=[vendor],
        any_of=[
            [
                "notify",
                "privacy counsel",
                "breach counsel",
                "forensic",
                "regulator",
                "specific indemnity",
                "special indemnity",
            ]
        ],
        evidence=finding,
        evidence_paths=[path],
    )


def amendment_coc(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    title = "Component Supply Agreement"
    odate, adate = ctx.date_pair()
    text, nums = agreement(
        ctx,
        title,
        legal,
        "Supplier",
        odate,
        [
            (
                "Term and Termination",
                f"Either party may terminate this Agreement for material breach by the other party that "
                f"remains uncured for sixty (60) days after written notice describing the breach in "
                f"reasonable detail, delivered to {short} or the Company as applicable.",
            )
        ],
    )
    opath = ctx.add(
        "suppliers", s, f"component_supply_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    added = (
        f'Section {nums["Term and Termination"]} of the Agreement is amended by adding at the end: "In addition, '
        f"{short} may terminate this Agreement immediately upon written notice if the Company undergoes a Change "
        f'of Control, meaning a merger or sale of more than fifty percent (50%) of its voting securities."'
    )
    atext = amendment(
        ctx,
        2,
        title,
        legal,
        adate,
        odate,
        [
            f"The pricing table in Schedule A is replaced by the pricing table attached to this Amendment, effective "
            f"from the first day of the next calendar quarter for all orders placed with {short}.",
            added,
        ],
    )
    apath = ctx.add(
        "suppliers", s, f"amendment_no_2_{s}.txt", f"Amendment No. 2 - {title} - {short}", atext, "amendment"
    )
    k = "amendment_coc"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags that {short} may terminate the supply agreement on a change of control.",
        entities=[short],
        any_of=[COC, ["terminat"]],
        evidence=added,
        evidence_paths=[apath],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites Amendment No. 2 ({apath}) as the source of the {short} termination right.",
        entities=[short],
        paths=[apath],
        evidence=added,
    )
    ctx.crit(
        iid,
        k,
        "connect",
        f"The memo connects Amendment No. 2 with the original {short} supply agreement "
        f"({opath}): the change-of-control right was added by the amendment.",
        entities=[short],
        any_of=[["amend"]],
        paths=[opath, apath],
        evidence=added,
        evidence_paths=[opath, apath],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends obtaining {short}'s consent or waiver.",
        entities=[short],
        any_of=[OBTAIN, CONSENT],
        evidence=added,
        evidence_paths=[apath],
    )


def missing_side_letter(ctx: Ctx, iid: str) -> None:
    short, legal, s = _cp(ctx)
    rebate = ctx.rng.randrange(4, 120) * 25_000
    title = "Customer Agreement"
    text, _ = agreement(
        ctx,
        title,
        legal,
        "Customer",
        ctx.date(),
        [
            (
                "Entire Agreement",
                f"This Agreement constitutes the entire agreement between the Company and {short} with "
                "respect to its subject matter and supersedes all prior proposals and understandings.",
            )
        ],
    )
    cpath = ctx.add("customers", s, f"customer_agreement_{s}.txt", f"{title} - {short}", text, "agreement")
    sl_date, mdate = ctx.date_pair()
    item = (
        f"The Chief Executive Officer reported on the side letter entered into with {short} on {sl_date}, under "
        f"which the Company agreed to pay {short} a volume rebate of {money(rebate)} and granted {short} a right "
        "of first refusal on future product lines; after discussion the Board ratified the side letter."
    )
    mtext = minutes(ctx, mdate, [item])
    year = mdate.rsplit(" ", 1)[1]
    mpath = ctx.add(
        "corporate",
        f"board_minutes/{year}",
        f"board_minutes_{slug(mdate)}.txt",
        f"Board minutes {mdate}",
        mtext,
        "minutes",
    )
    k = "missing_side_letter"
    sl = ["side letter"]
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the {short} side letter (rebate and right of first refusal) ratified by the board.",
        entities=[short],
        any_of=[sl],
        evidence=item,
        evidence_paths=[mpath],
    )
    ctx.crit(
        iid,
        k,
        "absence",
        f"The memo notes that the {short} side letter is not in the data room.",
        entities=[short],
        any_of=[
            sl,
            [
                "missing",
                "not in the data room",
                "not included",
                "not provided",
                "absent",
                "not found",
                "no copy",
                "not located",
                "not been provided",
                "not produced",
                "not contained",
                "not in the room",
            ],
        ],
        evidence=item,
        evidence_paths=[mpath],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites the board minutes {mpath} that refer to the {short} side letter.",
        entities=[short],
        paths=[mpath],
        evidence=item,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the {short} rebate ({money(rebate)}).",
        entities=[short],
        amounts=[(rebate, 0.02)],
        evidence=item,
        evidence_paths=[mpath],
    )
    ctx.crit(
        iid,
        k,
        "connect",
        f"The memo connects the side letter in the minutes with the {short} customer "
        f"agreement ({cpath}), whose entire-agreement clause does not reflect it.",
        entities=[short],
        paths=[mpath, cpath],
        evidence=item,
        evidence_paths=[mpath, cpath],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        f"The memo recommends requesting a copy of the {short} side letter.",
        entities=[short],
        any_of=[["request", "obtain a copy", "obtain the side letter", "produce", "ask for"]],
        evidence=item,
        evidence_paths=[mpath],
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
    k = "tax_assessment"
    ctx.crit(
        iid,
        k,
        "identify",
        f"The memo flags the proposed tax assessment by the {agency}.",
        entities=[agency],
        any_of=[["assessment", "proposed adjustment", "deficiency", "audit", "examination"]],
        evidence=finding,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "cite",
        f"The memo cites {path} for the proposed assessment.",
        entities=[agency],
        paths=[path],
        evidence=finding,
    )
    ctx.crit(
        iid,
        k,
        "quantify",
        f"The memo states the amount proposed ({money(amount)}).",
        entities=[agency],
        amounts=[(amount, 0.02)],
        evidence=finding,
        evidence_paths=[path],
    )
    ctx.crit(
        iid,
        k,
        "next_step",
        "The memo recommends a tax indemnity, escrow or reserve for the assessment.",
        entities=[agency],
        any_of=[
            ["tax indemnity", "specific indemnity", "special indemnity", "escrow", "reserve", "holdback"]
        ],
        evidence=finding,
        evidence_paths=[path],
    )


# ---------------------------------------------------------------- decoys
def _coc_clause(short: str) -> str:
    return (
        f"{short} may terminate this Agreement upon written notice if the Company undergoes a Change of Control "
        f"without the prior written consent of {short}."
    )


def decoy_coc_deleted(ctx: Ctx, did: str) -> None:
    short, legal, s = _cp(ctx)
    title = "Reseller Agreement"
    odate, adate = ctx.date_pair()
    clause = _coc_clause(short)
    text, nums = agreement(ctx, title, legal, "Reseller", odate, [("Termination", clause)])
    opath = ctx.add(
        "material_contracts", s, f"reseller_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    deletion = (
        f"Section {nums['Termination']} of the Agreement (termination by {short} upon a Change of Control) is "
        "hereby deleted in its entirety and shall be of no further force or effect."
    )
    atext = amendment(ctx, 1, title, legal, adate, odate, [deletion])
    apath = ctx.add(
        "material_contracts",
        s,
        f"amendment_no_1_{s}.txt",
        f"Amendment No. 1 - {title} - {short}",
        atext,
        "amendment",
    )
    ctx.crit(
        did,
        "decoy_coc_deleted",
        "trap",
        f"The memo does not flag the {short} change-of-control termination "
        f"right as live: Amendment No. 1 ({apath}) deleted it.",
        entities=[short],
        any_of=[COC, ["terminat"]],
        forbidden=["deleted", "removed", "no longer", "struck", "eliminated", "no further force"],
        evidence=deletion,
        evidence_paths=[opath, apath],
        trap=True,
    )


def decoy_consent_waived(ctx: Ctx, did: str) -> None:
    short, legal, s = _cp(ctx)
    title = "Master Purchase Agreement"
    clause = _coc_clause(short)
    odate, wdate = ctx.date_pair()
    text, nums = agreement(ctx, title, legal, "Customer", odate, [("Termination", clause)])
    opath = ctx.add(
        "customers", s, f"master_purchase_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    waiver = (
        f"{short} hereby irrevocably consents to the proposed acquisition of the Company by {ctx.deal['buyer']} "
        f"and waives any right to terminate the Agreement under Section {nums['Termination']} arising from "
        "that Change of Control."
    )
    ltext = letter(ctx, legal, ctx.t_legal, wdate, f"Consent and waiver - {title}", [waiver], short)
    lpath = ctx.add(
        "customers", s, f"consent_and_waiver_{s}.txt", f"Consent and waiver - {short}", ltext, "letter"
    )
    ctx.crit(
        did,
        "decoy_consent_waived",
        "trap",
        f"The memo does not flag the {short} change-of-control consent as "
        f"outstanding: {short} already consented and waived it ({lpath}).",
        entities=[short],
        any_of=[COC, ["consent", "terminat"]],
        forbidden=["waive", "already consented", "has consented", "irrevocably consent", "consented"],
        evidence=waiver,
        evidence_paths=[opath, lpath],
        trap=True,
    )


def decoy_debt_repaid(ctx: Ctx, did: str) -> None:
    short, legal, s = _cp(ctx)
    clause = (
        f"The occurrence of a Change of Control shall constitute an Event of Default, upon which {short} may "
        "declare all Obligations immediately due and payable."
    )
    title = "Loan and Security Agreement"
    odate, pdate = ctx.date_pair()
    text, _ = agreement(ctx, title, legal, "Lender", odate, [("Events of Default", clause)])
    opath = ctx.add(
        "financing", s, f"loan_and_security_agreement_{s}.txt", f"{title} - {short}", text, "agreement"
    )
    payoff = (
        f"{short} confirms that all Obligations under the {title} have been repaid and paid in full, that the "
        "agreement is terminated and that all liens securing the Obligations are released."
    )
    ltext = letter(ctx, legal, ctx.t_legal, pdate, "Payoff confirmation", [payoff], short)
    lpath = ctx.add("financing", s, f"payoff_letter_{s}.txt", f"Payoff letter - {short}", ltext, "letter")
    ctx.crit(
        did,
        "decoy_debt_repaid",
        "trap",
        f"The memo does not flag the {short} change-of-control default as "
        f"live: the loan was repaid and terminated ({lpath}).",
        entities=[short],
        any_of=[COC, ["default", "prepay", "accelerat", "due and payable"]],
        forbidden=["repaid", "paid in full", "payoff", "pay off", "terminated", "released", "discharged"],
        evidence=payoff,
        evidence_paths=[opath, lpath],
        trap=True,
    )


def decoy_litigation_dismissed(ctx: Ctx, did: str) -> None:
    short, legal, s = _cp(ctx)
    claimed = ctx.rng.randrange(10, 600) * 50_000
    text, claim = _complaint(ctx, legal, short, claimed, "Superior Court of the State of California")
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
    ctx.crit(
        did,
        "decoy_litigation_dismissed",
        "trap",
        f"The memo does not flag the {short} lawsuit as pending: it was dismissed with prejudice ({opath}).",
        entities=[short],
        amounts=[(claimed, 0.02)],
        any_of=[["lawsuit", "complaint", "litigation", "suit", "claim", "action"]],
        forbidden=["dismiss", "settled", "withdrawn", "resolved"],
        evidence=order,
        evidence_paths=[cpath, opath],
        trap=True,
    )


def decoy_permit_renewed(ctx: Ctx, did: str) -> None:
    agency = ctx.rng.choice(AGENCIES_ENV)
    pid = _permit_id(ctx)
    expiry, renewed = ctx.date_pair()
    notice = (
        f"Our records indicate that Permit No. {pid} issued to the Company's facility expired on {expiry}."
    )
    text = letter(ctx, agency, ctx.t_legal, expiry, f"Permit No. {pid}", [notice], ctx.t_short)
    npath = ctx.add(
        "environmental",
        "permits",
        f"agency_notice_{slug(pid)}.txt",
        f"Agency notice - Permit {pid}",
        text,
        "letter",
    )
    grant = (
        f"Permit No. {pid} is hereby renewed for a term of five (5) years from the date of this letter, on the "
        "conditions set out in the attached schedule."
    )
    gtext = letter(ctx, agency, ctx.t_legal, renewed, f"Renewal of Permit No. {pid}", [grant], ctx.t_short)
    gpath = ctx.add(
        "environmental",
        "permits",
        f"permit_renewal_{slug(pid)}.txt",
        f"Permit renewal - {pid}",
        gtext,
        "letter",
    )
    ctx.crit(
        did,
        "decoy_permit_renewed",
        "trap",
        f"The memo does not flag Permit {pid} as expired: it was renewed ({gpath}).",
        entities=[pid],
        any_of=[["expired", "lapsed", "expiration"]],
        forbidden=["renew", "reissued", "reinstated"],
        evidence=grant,
        evidence_paths=[npath, gpath],
        trap=True,
    )


# kind -> (builder, documents it adds)
ISSUES = {
    "coc_termination": (coc_termination, 1),
    "anti_assignment": (anti_assignment, 1),
    "exclusivity_affiliates": (exclusivity_affiliates, 1),
    "mfn": (mfn, 1),
    "uncapped_indemnity": (uncapped_indemnity, 1),
    "debt_coc_default": (debt_coc_default, 1),
    "pending_litigation": (pending_litigation, 1),
    "exec_cic_payment": (exec_cic_payment, 1),
    "missing_ip_assignment": (missing_ip_assignment, 3),
    "lease_landlord_consent": (lease_landlord_consent, 1),
    "expired_permit": (expired_permit, 1),
    "unreported_breach": (unreported_breach, 1),
    "amendment_coc": (amendment_coc, 2),
    "missing_side_letter": (missing_side_letter, 2),
    "tax_assessment": (tax_assessment, 1),
}
DECOYS = {
    "decoy_coc_deleted": (decoy_coc_deleted, 2),
    "decoy_consent_waived": (decoy_consent_waived, 2),
    "decoy_debt_repaid": (decoy_debt_repaid, 2),
    "decoy_litigation_dismissed": (decoy_litigation_dismissed, 2),
    "decoy_permit_renewed": (decoy_permit_renewed, 2),
}
