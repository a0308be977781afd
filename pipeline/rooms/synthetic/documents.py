"""Document renderers of the synthetic rooms: agreements, amendments, letters, reports, minutes.

Each renderer surrounds the clauses it is given (``planted``: (heading,
clause) pairs, or the paragraphs of a letter) with ordinary sections from the
prose writer, so a planted clause sits buried among boilerplate. Issue
builders (pipeline.rooms.synthetic.issues) and the ordinary-document filler
(pipeline.rooms.synthetic.ordinary) share them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.rooms.synthetic.context import Ctx, Party
from pipeline.rooms.synthetic.templates import (
    MINUTES_SENTENCES,
    PLEADING_HEADINGS,
    REPORT_HEADINGS,
    ROLES,
    definitions,
    money,
    signature_block,
    slug,
)


def agreement(
    ctx: Ctx,
    title: str,
    cp_legal: str,
    role: str,
    date: str,
    planted: Sequence[tuple[str, str]] = (),
    chars: int | None = None,
    recital: str = "",
) -> tuple[str, dict[str, str]]:
    """An agreement between the target and a counterparty; returns (text, section number by heading)."""
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
    """A numbered amendment to an agreement, stating ``changes`` as its numbered amendments."""
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
    """A letter from ``sender`` whose given paragraphs sit among ordinary ones."""
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
    planted: Sequence[tuple[str, str]] = (),
    chars: int | None = None,
    party: str | None = None,
    headings: list[str] | None = None,
) -> str:
    """A report (or pleading, certificate, patent) with ``planted`` sections among ordinary ones."""
    chars = chars or ctx.size()
    head = f"{title.upper()}\n\n{intro}"
    secs, _ = ctx.writer.sections(
        party or ctx.t_short, chars - len(head), planted=list(planted), headings=headings or REPORT_HEADINGS
    )
    return "\n\n".join([head, *secs]) + "\n"


def minutes(ctx: Ctx, date: str, items: list[str], chars: int | None = None) -> str:
    """Board minutes whose numbered items include ``items`` among ordinary business."""
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


def complaint(ctx: Ctx, plaintiff_legal: str, plaintiff: str, claimed: int, court: str) -> tuple[str, str]:
    """A complaint by ``plaintiff`` against the Company; returns (text, the prayer for relief)."""
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


# The filed_* helpers write a document and file it the way a data room files that kind of document:
# under the counterparty's folder, named after the document and the counterparty.


def filed_agreement(
    ctx: Ctx,
    party: Party,
    category: str,
    title: str,
    role: str,
    planted: Sequence[tuple[str, str]],
    *,
    date: str = "",
    stem: str = "",
    sub: str = "",
    recital: str = "",
) -> tuple[str, dict[str, str]]:
    """An agreement with ``party`` filed as ``<sub or party slug>/<stem or title slug>_<party slug>.txt``.

    Returns (path, section number by heading); ``date`` defaults to a fresh one.
    """
    text, numbers = agreement(ctx, title, party.legal, role, date or ctx.date(), planted, recital=recital)
    filename = f"{stem or slug(title)}_{party.slug}.txt"
    path = ctx.add(category, sub or party.slug, filename, f"{title} - {party.short}", text, "agreement")
    return path, numbers


def filed_amendment(
    ctx: Ctx, party: Party, category: str, number: int, title: str, dates: tuple[str, str], changes: list[str]
) -> str:
    """Amendment No. ``number`` to ``title`` (``dates``: the agreement's, the amendment's), filed beside it."""
    orig_date, date = dates
    text = amendment(ctx, number, title, party.legal, date, orig_date, changes)
    label = f"Amendment No. {number} - {title} - {party.short}"
    return ctx.add(category, party.slug, f"amendment_no_{number}_{party.slug}.txt", label, text, "amendment")


def filed_minutes(ctx: Ctx, date: str, items: list[str]) -> str:
    """Board minutes of ``date`` holding ``items``, filed as ``board_minutes/<year>/board_minutes_<date>.txt``."""
    text = minutes(ctx, date, items)
    year = date.rsplit(" ", 1)[1]
    return ctx.add(
        "corporate",
        f"board_minutes/{year}",
        f"board_minutes_{slug(date)}.txt",
        f"Board minutes {date}",
        text,
        "minutes",
    )


def filed_letter(
    ctx: Ctx, party: Party, category: str, date: str, subject: str, para: str, label: str
) -> str:
    """A letter from ``party`` filed as ``<party slug>/<label slug>_<party slug>.txt``."""
    text = letter(ctx, party.legal, ctx.t_legal, date, subject, [para], party.short)
    filename = f"{slug(label)}_{party.slug}.txt"
    return ctx.add(category, party.slug, filename, f"{label} - {party.short}", text, "letter")


def permit_letter(
    ctx: Ctx, agency: str, pid: str, date: str, subject: str, para: str, stem: str, label: str
) -> str:
    """A letter from an environmental agency about Permit ``pid``, filed with the permits."""
    text = letter(ctx, agency, ctx.t_legal, date, subject, [para], ctx.t_short)
    return ctx.add("environmental", "permits", f"{stem}_{slug(pid)}.txt", label, text, "letter")
