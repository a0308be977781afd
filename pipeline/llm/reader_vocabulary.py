"""The extractive reader's own vocabulary of diligence risks: how a clause says it, how a reviewer writes it up.

The reader (pipeline.llm.extractive) stands in for a subagent model. A model
reads with what it learnt about contracts, not with the judge's rubric, so
this vocabulary is written for the reader alone: regular expressions for how
contracts and letters word each risk, and a reviewer's label, summary and
next step for it. Nothing here comes from pipeline.grading (the layering test
forbids the import), so on generated rooms the reader and the judge agree only
where both read the documents right, and the headline measures reading, not
shared word lists.

``RISKS``: the risks a buyer's counsel looks for in any data room, tried in
order (a more specific risk before the one whose wording it contains: a
change-of-control default also says "terminate"). A sentence states a risk
when every pattern of its ``signs`` matches, and every one of ``context``
(wording that separates the risk from boilerplate that shares its words).
``CLAUSES``: contract clauses worth a reviewer's note in commercial contracts
(real agreements, e.g. CUAD rooms), tried when no risk matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DASHES = re.compile(r"[-\u2010-\u2015_]+")
_SPACES = re.compile(r"\s+")


def fold(text: str) -> str:
    """Lower case, dashes as spaces, whitespace collapsed: how the reader compares names and words."""
    return _SPACES.sub(" ", _DASHES.sub(" ", text.lower().replace("\u2019", "'"))).strip()


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# A change in who controls the company, however a contract words it.
CHANGE = r"change[\s-]+(?:of|in)[\s-]+(?:control|ownership)|\bacquisition of control\b"


@dataclass(frozen=True)
class Risk:
    """One risk: how a sentence states it (``signs``, all of them; ``context``, all of them) and the note."""

    key: str
    label: str
    signs: tuple[re.Pattern[str], ...]
    summary: str  # {p}: the main party; {ps}: all parties; {records}: " (about N records)" or ""
    next_step: str
    context: tuple[re.Pattern[str], ...] = ()
    alone: re.Pattern[str] | None = None  # a wording that states the risk without its signs
    nobody: str = "the counterparty"  # who {p} is when the sentence names no party


def _risk(key, label, signs, summary, next_step, context=(), alone=None, nobody="the counterparty") -> Risk:
    return Risk(
        key,
        label,
        tuple(map(_rx, signs)),
        summary,
        next_step,
        tuple(map(_rx, context)),
        _rx(alone) if alone else None,
        nobody,
    )


RISKS: list[Risk] = [
    _risk(
        "unreported_breach",
        "Data incident never notified",
        [
            r"\bbreach\w*|unauthori[sz]ed (?:access|acquisition)|security incident|exfiltrat\w*|intrusion",
            r"\bnot (?:yet |been |were |was )*(?:notified|reported|disclosed)|\bno (?:notice|notification)"
            r"|\bunreported\b|\bwithout notif\w*|\bfail\w* to notify|\bdefer\w* (?:the )?notif\w*|\bnot given notice",
        ],
        "An attacker took customer data held by {p}{records}; the breach has not been reported to the "
        "individuals or to the regulators.",
        "Ask privacy counsel whether notice is now overdue, and get a specific indemnity for the incident at {p}.",
    ),
    _risk(
        "missing_side_letter",
        "Side letter outside the contract file",
        [r"\bside letter\b"],
        "The board approved a side letter with {p} (a rebate and a first refusal right) that is not in the "
        "data room.",
        "Ask for the side letter with {p} and compare it with the customer agreement.",
    ),
    _risk(
        "debt_coc_default",
        "Loan default on a change of control",
        [CHANGE, r"\bdefault\w*|\bprepa\w*|\baccelerat\w*|due and payable|\brepay\w*"],
        "The lender {p} treats a change of control as a default and can call the loans early.",
        "Plan a payoff letter or refinancing at closing, or get {p} to waive the default.",
        context=[
            r"\bloans?\b|\bobligations\b|\bborrower\b|event of default|\bindebtedness\b|\bcredit\b|\bnotes?\b"
        ],
        nobody="the lender",
    ),
    _risk(
        "exec_cic_payment",
        "Executive payout on a change in control",
        [
            CHANGE,
            r"\bpayments?\b|\bbonus\w*|\bseverance\b|\btrigger\b|\baccelerat\w*|\bvest\w*|\bparachute\b",
        ],
        "{p} gets a change-in-control bonus on closing, whether or not they stay employed (single trigger).",
        "Count the payment to {p} as a deal cost in the funds flow and check it under section 280G.",
        context=[
            r"\bemploy|\bexecutive\b|\bbonus\b|\bseverance\b|\bequity awards?\b",
            r"[$\u20ac\u00a3]\s?\d|\btimes\b",  # a sum owed, not a list of plan types
        ],
        nobody="the executive",
    ),
    _risk(
        "coc_termination",
        "Termination right on a change of control",
        [CHANGE, r"\bterminat\w*|\bcancel\w*"],
        "If the Company changes control, {p} may terminate the contract.",
        "Get {p} to waive the right before signing.",
    ),
    _risk(
        "lease_landlord_consent",
        "Landlord approval of the deal",
        [
            r"\bconsent\w*|\bapprov\w*",
            r"\bassign\w*|controlling interest|" + CHANGE + r"|\btransfer\w*|\bsublet",
        ],
        "Under the lease, a transfer of control of the tenant needs the consent of {p} as landlord.",
        "Ask {p} for consent (or an estoppel certificate) ahead of closing.",
        context=[r"\b(?:landlord|tenant|lease|premises|sublet)"],
        nobody="the landlord",
    ),
    _risk(
        "anti_assignment",
        "No assignment without approval",
        [
            r"\bassign\w*",
            r"\bconsent\w*|\bapprov\w*|operation of law|\bmerger\b|null and void|\bvoid\b",
        ],
        "The contract bars any assignment by {p}'s counterparty, a merger or operation of law included, "
        "unless {p} gives consent.",
        "Ask {p} for a waiver covering the deal.",
    ),
    _risk(
        "coc_consent",
        "Consent needed for a change of control",
        [CHANGE, r"\bconsent\w*|\bapprov\w*"],
        "{p} must consent before the Company can change control.",
        "Get {p}'s written consent before closing.",
    ),
    _risk(
        "exclusivity_affiliates",
        "Exclusivity that reaches affiliates",
        [
            r"\bexclusiv\w*|non[\s-]?compet\w*|not (?:to )?compete|restrictive covenant",
            r"\baffiliat\w*",
        ],
        "The exclusive dealing and non-compete promise to {p} also binds the Company's affiliates, "
        "so after closing it would bind the buyer too.",
        "Carve the buyer's group out, or get {p} to waive it.",
        context=[r"\bcompet|\bexclusive (?:distribut|supplier|right|licen)|\bexclusively\b"],
    ),
    _risk(
        "mfn",
        "Best-price promise (most favoured nation)",
        [r"most[\s-]+favou?red|no less favou?rable|\bbest pric\w*|\bmfn\b|\blowest price"],
        "{p} is promised the best price: if another customer pays less, {p} gets the same (MFN) price "
        "and a refund.",
        "Check the prices charged to other customers for MFN exposure, or renegotiate with {p}.",
    ),
    _risk(
        "uncapped_indemnity",
        "Indemnity with no cap",
        [
            r"\bindemn\w*|hold harmless",
            r"uncapped|unlimited|\bno cap\b|not (?:be )?subject to any|not capped|no limitation"
            r"|without (?:any )?(?:cap\b|limit\b|limit (?:on|of|as))",
        ],
        "The Company must indemnify {p} without any cap on the amount (an uncapped indemnity).",
        "Ask {p} for a cap, or cover the exposure with escrow or a special indemnity.",
        alone=r"\bindemn\w*.*\bnot (?:be )?subject to any (?:limitation|cap)",
    ),
    _risk(
        "missing_ip_assignment",
        "Inventors who may not have assigned",
        [r"\bassign\w*|\bpiia\b|invention agreement", r"\bpatent\w*|\binvent\w*"],
        "The patent names {ps} as inventors; the Company owns it only if each of them assigned the invention.",
        "Look for signed assignments in the employment files, or get confirmatory ones before closing.",
        context=[r"\binventors?\s*:|\binventors? (?:named|listed)|\blists? .{0,60}\binventors?\b"],
        alone=r"\bpatent|\binvention",
        nobody="the inventors",
    ),
    _risk(
        "expired_permit",
        "Permit no longer valid",
        [r"\bexpired\b|\bexpiration\b|\blapsed\b|without a valid"],
        "{p} has expired and the site runs without a valid permit, open to fines.",
        "Renew {p} before closing or make the renewal a condition.",
        context=[
            r"\bpermit no\b|\bwithout a valid (?:permit|licen[cs]e)"
            r"|\b(?:permit|licen[cs]e|registration)\b[^;]{0,80}?\b(?:has |have )?(?:expired|lapsed)\b"
        ],
        nobody="the permit",
    ),
    _risk(
        "tax_assessment",
        "Tax authority proposing more tax",
        [r"\bassess\w*|proposed adjustment|\bdeficienc\w*|\baudit\w*|\bexamination\b"],
        "{p} has proposed an assessment of additional tax against the Company.",
        "Get a tax indemnity or an escrow for what {p} proposes.",
        context=[r"\btax", r"\bpropos|\bassessed\b|\bnotice of (?:proposed )?(?:assessment|deficiency)"],
        nobody="the tax authority",
    ),
    _risk(
        "pending_litigation",
        "Lawsuit against the Company",
        [r"\blawsuit\w*|\bcomplaint\b|\blitigation\b|\bsuit\b|\bclaims?\b|\baction\b|\bsued\b"],
        "{p} is suing the Company and the claim is still pending (open litigation).",
        "Have litigation counsel weigh the claim by {p}; cover it with a special indemnity or escrow.",
        context=[
            r"(?-i:Plaintiff [A-Z]|[A-Z][\w&.-]+ claims (?:that|damages))|\bdemands? judgment|\bsued\b"
            r"|\bha(?:s|ve) (?:filed|brought|commenced) (?:a |an )?(?:complaint|suit|action|lawsuit)"
        ],
    ),
]
RISK = {r.key: r for r in RISKS}


@dataclass(frozen=True)
class Clause:
    """A commercial-contract clause a reviewer notes: how it is worded, and what it means for the deal."""

    key: str
    label: str
    pattern: re.Pattern[str]
    meaning: str  # {p}: the counterparty


def _clause(key: str, label: str, pattern: str, meaning: str) -> Clause:
    return Clause(key, label, _rx(pattern), meaning)


CLAUSES: list[Clause] = [
    _clause("change_of_control", "change of control", CHANGE, "a change of control gives {p} rights"),
    _clause(
        "assignment_restriction",
        "anti-assignment",
        r"(?:may|shall) not (?:be )?assign\w*|without (?:the )?prior written consent.{0,80}assign\w*"
        r"|assign\w*.{0,80}without (?:the )?(?:prior )?(?:written )?consent",
        "the contract cannot be assigned without {p}'s consent",
    ),
    _clause(
        "non_compete",
        "non-compete",
        r"non[\s-]?compet\w*|shall not (?:directly or indirectly )?(?:engage in|compete)",
        "the Company may not compete in the field covered by its contract with {p}",
    ),
    _clause("exclusivity", "exclusivity", r"\bexclusiv(?:e|ity|ely)\b", "the contract with {p} is exclusive"),
    _clause(
        "no_solicit",
        "no-solicitation",
        r"non[\s-]?solicit\w*|(?:shall|will) not (?:directly or indirectly )?solicit",
        "the parties may not solicit each other's staff or customers",
    ),
    _clause(
        "best_terms",
        "most-favoured pricing",
        r"most[\s-]+favou?red|no less favou?rable|\bbest pric",
        "{p} is owed the best terms given to anyone else",
    ),
    _clause(
        "first_refusal",
        "right of first refusal",
        r"right of first (?:refusal|offer|negotiation)",
        "{p} gets a first look before a sale to others",
    ),
    _clause(
        "termination_for_convenience",
        "termination for convenience",
        r"terminat\w*.{0,60}(?:for (?:its |any |their )?convenience|without cause|for any reason|at any time)",
        "{p} can end the contract without cause",
    ),
    _clause(
        "auto_renewal",
        "automatic renewal",
        r"automatic(?:ally)? renew|auto[\s-]?renew|renew\w* automatically|successive (?:renewal )?(?:terms|periods)",
        "the term renews unless someone gives notice",
    ),
    _clause(
        "minimum_commitment",
        "minimum purchase commitment",
        r"minimum (?:purchase|order|volume|quantit|commitment|annual)\w*|take[\s-]or[\s-]pay",
        "a minimum volume must be bought from or sold to {p}",
    ),
    _clause(
        "revenue_share",
        "revenue sharing or royalties",
        r"revenue[\s-]shar\w*|profit[\s-]shar\w*|\broyalt(?:y|ies)\b",
        "{p} takes a share of revenue or royalties",
    ),
    _clause(
        "ip_assignment",
        "IP ownership assignment",
        r"(?:hereby|shall) assign\w*.{0,80}(?:right, title and interest|intellectual property|inventions?|work product)",
        "intellectual property created under the contract passes to one side",
    ),
    _clause(
        "joint_ip",
        "joint IP ownership",
        r"\bjointly own\w*|\bjoint ownership\b",
        "IP is owned jointly with {p}",
    ),
    _clause(
        "license_grant",
        "licence grant",
        r"\bgrants? .{0,60}\blicen[cs]e\b",
        "the contract licenses intellectual property to or from {p}",
    ),
    _clause(
        "audit_rights",
        "audit right",
        r"right to audit|\bmay audit\b|\baudit (?:the )?(?:books|records)|inspect .{0,30}(?:books|records)",
        "{p} may audit the books and records",
    ),
    _clause(
        "uncapped_liability",
        "unlimited liability",
        r"(?:unlimited|uncapped) liability|liability .{0,40}(?:unlimited|shall not be limited)",
        "one side's liability to {p} has no limit",
    ),
    _clause(
        "liability_cap",
        "cap on liability",
        r"(?:aggregate|total|maximum) liability|liability .{0,80}(?:shall not|will not|not to) exceed"
        r"|in no event shall .{0,80}(?:liab|exceed)",
        "liability under the contract with {p} is capped",
    ),
    _clause(
        "liquidated_damages",
        "liquidated damages",
        r"liquidated damages",
        "a fixed sum is owed on breach of the contract with {p}",
    ),
    _clause(
        "warranty_period",
        "warranty period",
        r"warrant\w* .{0,60}(?:for a period of|\d+ (?:days|months|years))",
        "warranties to {p} run for a set period",
    ),
    _clause(
        "insurance",
        "insurance requirement",
        r"(?:maintain|carry|procure) .{0,60}insurance",
        "insurance must be kept in force for {p}",
    ),
    _clause(
        "no_challenge",
        "covenant not to sue",
        r"covenant not to sue|not (?:to )?(?:contest|challenge) .{0,40}(?:validity|ownership)",
        "a party may not challenge {p}'s rights",
    ),
    _clause(
        "third_party_beneficiary",
        "third-party beneficiary",
        r"third[\s-]party beneficiar",
        "someone outside the contract with {p} can enforce it",
    ),
    _clause(
        "source_code_escrow",
        "source code escrow",
        r"source code .{0,40}escrow|escrow .{0,40}source code",
        "source code is held in escrow for {p}",
    ),
    _clause(
        "post_termination",
        "post-termination obligations",
        r"(?:after|following|upon) (?:the )?(?:expiration or )?terminat\w*.{0,80}(?:continue|transition|wind[\s-]down)",
        "duties to {p} continue after the contract ends",
    ),
]
CLAUSE = {c.key: c for c in CLAUSES}
assert not set(RISK) & set(CLAUSE), "a clause and a risk share a key"
