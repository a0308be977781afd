"""The extractive reader's own vocabulary of diligence risks: how a clause says it, how a reviewer writes it up.

The reader (pipeline.llm.extractive) stands in for a subagent model. A model
reads with what it learnt about contracts, not with the judge's rubric, so
this vocabulary is written for the reader alone: regular expressions for how
contracts and letters word each risk, and a reviewer's label for it: the
kind of clause, never a verdict or a recommendation (those are the root's to
write, from the facts of the whole room). Nothing here comes from pipeline.grading (the layering test
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
    """One risk: how a sentence states it (``signs``, all of them; ``context``, all of them) and its label."""

    key: str
    label: str
    signs: tuple[re.Pattern[str], ...]
    context: tuple[re.Pattern[str], ...] = ()
    alone: re.Pattern[str] | None = None  # a wording that states the risk without its signs


def _risk(key, label, signs, context=(), alone=None) -> Risk:
    return Risk(
        key,
        label,
        tuple(map(_rx, signs)),
        tuple(map(_rx, context)),
        _rx(alone) if alone else None,
    )


RISKS: list[Risk] = [
    _risk(
        "unreported_breach",
        "Data breach not notified",
        [
            r"\bbreach\w*|unauthori[sz]ed (?:access|acquisition)|security incident|exfiltrat\w*|intrusion",
            r"\bnot (?:yet |been |were |was )*(?:notified|reported|disclosed)|\bno (?:notice|notification)"
            r"|\bunreported\b|\bwithout notif\w*|\bfail\w* to notify|\bdefer\w* (?:the )?notif\w*|\bnot given notice",
        ],
    ),
    _risk(
        "missing_side_letter",
        "Side letter referred to",
        [r"\bside letter\b"],
    ),
    _risk(
        "debt_coc_default",
        "Loan default on a change of control",
        [CHANGE, r"\bdefault\w*|\bprepa\w*|\baccelerat\w*|due and payable|\brepay\w*"],
        context=[
            r"\bloans?\b|\bobligations\b|\bborrower\b|event of default|\bindebtedness\b|\bcredit\b|\bnotes?\b"
        ],
    ),
    _risk(
        "exec_cic_payment",
        "Executive payment on a change in control",
        [
            CHANGE,
            r"\bpayments?\b|\bbonus\w*|\bseverance\b|\btrigger\b|\baccelerat\w*|\bvest\w*|\bparachute\b",
        ],
        context=[
            r"\bemploy|\bexecutive\b|\bbonus\b|\bseverance\b|\bequity awards?\b",
            r"[$\u20ac\u00a3]\s?\d|\btimes\b",  # a sum owed, not a list of plan types
        ],
    ),
    _risk(
        "coc_termination",
        "Termination right on a change of control",
        [CHANGE, r"\bterminat\w*|\bcancel\w*"],
    ),
    _risk(
        "lease_landlord_consent",
        "Landlord consent to a transfer of the lease",
        [
            r"\bconsent\w*|\bapprov\w*",
            r"\bassign\w*|controlling interest|" + CHANGE + r"|\btransfer\w*|\bsublet",
        ],
        context=[r"\b(?:landlord|tenant|lease|premises|sublet)"],
    ),
    _risk(
        "anti_assignment",
        "No assignment without consent",
        [
            r"\bassign\w*",
            r"\bconsent\w*|\bapprov\w*|operation of law|\bmerger\b|null and void|\bvoid\b",
        ],
    ),
    _risk(
        "coc_consent",
        "Consent needed for a change of control",
        [CHANGE, r"\bconsent\w*|\bapprov\w*"],
    ),
    _risk(
        "exclusivity_affiliates",
        "Exclusivity that reaches affiliates",
        [
            r"\bexclusiv\w*|non[\s-]?compet\w*|not (?:to )?compete|restrictive covenant",
            r"\baffiliat\w*",
        ],
        context=[r"\bcompet|\bexclusive (?:distribut|supplier|right|licen)|\bexclusively\b"],
    ),
    _risk(
        "mfn",
        "Best-price promise (most favoured nation)",
        [r"most[\s-]+favou?red|no less favou?rable|\bbest pric\w*|\bmfn\b|\blowest price"],
    ),
    _risk(
        "uncapped_indemnity",
        "Indemnity with no cap",
        [
            r"\bindemn\w*|hold harmless",
            r"uncapped|unlimited|\bno cap\b|not (?:be )?subject to any|not capped|no limitation"
            r"|without (?:any )?(?:cap\b|limit\b|limit (?:on|of|as))",
        ],
        alone=r"\bindemn\w*.*\bnot (?:be )?subject to any (?:limitation|cap)",
    ),
    _risk(
        "missing_ip_assignment",
        "Patent naming its inventors",
        [r"\bassign\w*|\bpiia\b|invention agreement", r"\bpatent\w*|\binvent\w*"],
        context=[r"\binventors?\s*:|\binventors? (?:named|listed)|\blists? .{0,60}\binventors?\b"],
        alone=r"\bpatent|\binvention",
    ),
    _risk(
        "expired_permit",
        "Expired permit",
        [r"\bexpired\b|\bexpiration\b|\blapsed\b|without a valid"],
        context=[
            r"\bpermit no\b|\bwithout a valid (?:permit|licen[cs]e)"
            r"|\b(?:permit|licen[cs]e|registration)\b[^;]{0,80}?\b(?:has |have )?(?:expired|lapsed)\b"
        ],
    ),
    _risk(
        "tax_assessment",
        "Proposed tax assessment",
        [r"\bassess\w*|proposed adjustment|\bdeficienc\w*|\baudit\w*|\bexamination\b"],
        context=[r"\btax", r"\bpropos|\bassessed\b|\bnotice of (?:proposed )?(?:assessment|deficiency)"],
    ),
    _risk(
        "pending_litigation",
        "Lawsuit against the Company",
        [r"\blawsuit\w*|\bcomplaint\b|\blitigation\b|\bsuit\b|\bclaims?\b|\baction\b|\bsued\b"],
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


def _clause(key: str, label: str, pattern: str) -> Clause:
    return Clause(key, label, _rx(pattern))


CLAUSES: list[Clause] = [
    _clause("change_of_control", "change of control", CHANGE),
    _clause(
        "assignment_restriction",
        "anti-assignment",
        r"(?:may|shall) not (?:be )?assign\w*|without (?:the )?prior written consent.{0,80}assign\w*"
        r"|assign\w*.{0,80}without (?:the )?(?:prior )?(?:written )?consent",
    ),
    _clause(
        "non_compete",
        "non-compete",
        r"non[\s-]?compet\w*|shall not (?:directly or indirectly )?(?:engage in|compete)",
    ),
    _clause("exclusivity", "exclusivity", r"\bexclusiv(?:e|ity|ely)\b"),
    _clause(
        "no_solicit",
        "no-solicitation",
        r"non[\s-]?solicit\w*|(?:shall|will) not (?:directly or indirectly )?solicit",
    ),
    _clause(
        "best_terms",
        "most-favoured pricing",
        r"most[\s-]+favou?red|no less favou?rable|\bbest pric",
    ),
    _clause(
        "first_refusal",
        "right of first refusal",
        r"right of first (?:refusal|offer|negotiation)",
    ),
    _clause(
        "termination_for_convenience",
        "termination for convenience",
        r"terminat\w*.{0,60}(?:for (?:its |any |their )?convenience|without cause|for any reason|at any time)",
    ),
    _clause(
        "auto_renewal",
        "automatic renewal",
        r"automatic(?:ally)? renew|auto[\s-]?renew|renew\w* automatically|successive (?:renewal )?(?:terms|periods)",
    ),
    _clause(
        "minimum_commitment",
        "minimum purchase commitment",
        r"minimum (?:purchase|order|volume|quantit|commitment|annual)\w*|take[\s-]or[\s-]pay",
    ),
    _clause(
        "revenue_share",
        "revenue sharing or royalties",
        r"revenue[\s-]shar\w*|profit[\s-]shar\w*|\broyalt(?:y|ies)\b",
    ),
    _clause(
        "ip_assignment",
        "IP ownership assignment",
        r"(?:hereby|shall) assign\w*.{0,80}(?:right, title and interest|intellectual property|inventions?|work product)",
    ),
    _clause(
        "joint_ip",
        "joint IP ownership",
        r"\bjointly own\w*|\bjoint ownership\b",
    ),
    _clause(
        "license_grant",
        "licence grant",
        r"\bgrants? .{0,60}\blicen[cs]e\b",
    ),
    _clause(
        "audit_rights",
        "audit right",
        r"right to audit|\bmay audit\b|\baudit (?:the )?(?:books|records)|inspect .{0,30}(?:books|records)",
    ),
    _clause(
        "uncapped_liability",
        "unlimited liability",
        r"(?:unlimited|uncapped) liability|liability .{0,40}(?:unlimited|shall not be limited)",
    ),
    _clause(
        "liability_cap",
        "cap on liability",
        r"(?:aggregate|total|maximum) liability|liability .{0,80}(?:shall not|will not|not to) exceed"
        r"|in no event shall .{0,80}(?:liab|exceed)",
    ),
    _clause(
        "liquidated_damages",
        "liquidated damages",
        r"liquidated damages",
    ),
    _clause(
        "warranty_period",
        "warranty period",
        r"warrant\w* .{0,60}(?:for a period of|\d+ (?:days|months|years))",
    ),
    _clause(
        "insurance",
        "insurance requirement",
        r"(?:maintain|carry|procure) .{0,60}insurance",
    ),
    _clause(
        "no_challenge",
        "covenant not to sue",
        r"covenant not to sue|not (?:to )?(?:contest|challenge) .{0,40}(?:validity|ownership)",
    ),
    _clause(
        "third_party_beneficiary",
        "third-party beneficiary",
        r"third[\s-]party beneficiar",
    ),
    _clause(
        "source_code_escrow",
        "source code escrow",
        r"source code .{0,40}escrow|escrow .{0,40}source code",
    ),
    _clause(
        "post_termination",
        "post-termination obligations",
        r"(?:after|following|upon) (?:the )?(?:expiration or )?terminat\w*.{0,80}(?:continue|transition|wind[\s-]down)",
    ),
]
CLAUSE = {c.key: c for c in CLAUSES}
assert not set(RISK) & set(CLAUSE), "a clause and a risk share a key"
