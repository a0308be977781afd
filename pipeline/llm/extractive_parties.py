"""Who a sentence names, for the extractive reader: parties and the target company.

``parties(sentence)`` finds companies, people and agencies (runs of two or
more capitalised words, cleaned of defined terms, roles, legal suffixes and
document titles) and permit ids; ``target_names(instruction, text)`` finds
the target company's names, which a finding never lists as a party.
"""

from __future__ import annotations

import re

from pipeline.llm.reader_vocabulary import fold

# A ``Target: <name>`` line of the instruction names the target company.
TARGET_LINE = re.compile(r"^\s*target\s*:\s*(?P<name>.+?)\s*$", re.IGNORECASE | re.MULTILINE)

# Defined terms, roles and sentence openers: never a party on their own.
_STOP = set(
    """
    a an the this that these those our its their his her if on in at by to of for during based neither either
    notwithstanding subject any all each such upon as pursuant except within after before under while where
    when whether unless until following no nos section sections schedule exhibit article articles clause annex
    company companies agreement agreements amendment amendments change control effective date tenant landlord
    lease premises borrower lender lenders obligations event events default term terms loan loans executive
    products product territory affiliate affiliates invention inventions fees fee contract year years permit
    permits customer customers supplier suppliers licensor licensee distributor reseller partner consultant
    agency holder lessor lessee provider party parties plaintiff defendant inventor inventors master services
    service supply purchase credit security business day days applicable law laws confidential information
    deliverables losses specifications closing buyer seller purchaser board directors director chief officer
    financial counsel general audit committee proprietary assignment order court fees payable intellectual
    property patent patents united states american dollars usd employee employees employment bonus target
    secretary chair whereas witness mr ms mrs dr re dear sir madam yours faithfully notice letter report
    minutes memorandum new york january february march april may june july august september october november
    december monday tuesday wednesday thursday friday saturday sunday vice president head operations
    """.split()
)
_AGENCY = {
    "department", "board", "service", "comptroller", "commission", "district", "agency", "office", "authority",
    "bureau", "revenue", "administration", "court", "ministry", "council", "tribunal",
}  # fmt: skip
_OPENERS = {"the", "our", "based", "if", "on", "in", "during", "upon", "as", "pursuant", "a", "an", "by", "to"}  # fmt: skip
_LEGAL = {"inc", "llc", "corp", "ltd", "lp", "gmbh", "s.a", "b.v", "plc", "co", "l.p", "n.v", "ag", "sa", "bv"}  # fmt: skip
_CONNECT = {"of", "and", "&", "for", "de", "du", "van", "von"}
# A run of capitalised words ending in one of these is a document's title ("Exclusive Distribution Agreement").
_TITLE_END = {
    "agreement", "amendment", "lease", "sublease", "note", "plan", "policy", "form", "report", "letter", "license",
    "licence", "notice", "order", "complaint", "certificate", "minutes", "handbook", "schedule", "exhibit", "act",
    "code", "rules", "regulations",
}  # fmt: skip
PERMIT_ID = re.compile(r"\b[A-Z]{1,4}-\d{3,}\b")
_TOKEN = re.compile(r"[A-Za-z][\w&'.-]*|\d[\w,.-]*|[^\w\s]")


def _clean(tok: str) -> str:
    tok = re.sub(r"['\u2019]s$", "", tok)
    return tok.rstrip(".") if tok.lower().rstrip(".") not in _LEGAL else tok


def _finish(run: list[str]) -> list[str]:
    """A run of capitalised words -> the parties in it."""
    while run and run[-1].lower() in _CONNECT:
        run.pop()
    if not run:
        return []
    agency = any(t.lower() in _AGENCY for t in run)
    if agency:
        while run and (run[0].lower() in _OPENERS or run[0].lower() in _CONNECT):
            run.pop(0)
        return [" ".join(run)] if len(run) >= 2 else []
    out = []
    for part in " ".join(run).split(" and "):
        words = part.split()
        if words and words[-1].lower() in _TITLE_END:
            continue
        while words and (words[-1].lower().rstrip(".") in _LEGAL or words[-1].lower() in _CONNECT):
            words.pop()  # "Bluestone Logistics LLC" -> "Bluestone Logistics"
        while words and (words[0].lower() in _STOP or words[0].lower() in _CONNECT):
            words.pop(0)
        while words and (words[-1].lower() in _STOP or words[-1].lower() in _CONNECT):
            words.pop()
        if len(words) >= 2 and not all(w.lower() in _STOP or w.lower() in _CONNECT for w in words):
            out.append(" ".join(words))
    return out


def parties(sentence: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """Names in a sentence: companies, people, agencies (two or more capitalised words) and permit ids."""
    found: list[str] = []
    run: list[str] = []
    for tok in _TOKEN.findall(sentence):
        word = _clean(tok)
        capital = word[:1].isalpha() and word[:1].isupper()
        if capital and (not word.isupper() or (run and word.lower().rstrip(".") in _LEGAL)):
            run.append(word)  # all-capitals words are headings ("MASTER SERVICES AGREEMENT"), not names
        elif word.lower() in _CONNECT and run:
            run.append(word.lower() if word.lower() != "&" else "&")
        else:
            found += _finish(run)
            run = []
    found += _finish(run)
    found += PERMIT_ID.findall(sentence)
    skip = [fold(x) for x in exclude if x]
    out: list[str] = []
    for name in found:
        n = fold(name)
        if any(n == s or s.startswith(n + " ") or n.startswith(s + " ") for s in skip):
            continue
        if name not in out:
            out.append(name)
    return out


_COMPANY_DEF = re.compile(
    r"(?P<name>[A-Z][\w&.,' -]{2,80}?)(?:,\s+an?\s+[^()]{0,80}?)?\s*\((?:the\s+)?[\"\u201c]Company[\"\u201d]\)"
)


def target_names(instruction: str, text: str) -> tuple[str, ...]:
    """The target company's names: a ``Target:`` line of the instruction, ``X (the "Company")`` in the text."""
    names = [m.group("name") for m in TARGET_LINE.finditer(instruction)]
    names += [m.group("name").strip(" ,") for m in _COMPANY_DEF.finditer(text)]
    out = []
    for n in names:
        out.append(n)
        words = [w for w in n.replace(",", " ").split() if w.lower().rstrip(".") not in _LEGAL]
        if len(words) >= 2:
            out.append(" ".join(words[:2]))
    return tuple(dict.fromkeys(out))
