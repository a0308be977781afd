"""The room under construction that every synthetic builder writes into.

``Ctx`` holds the seeded random generator, the name and prose generators, the
target and deal, and what has been written so far (documents, their paths,
rubric criteria, ids in use). Builders draw from ``ctx.rng`` in a fixed order,
which is what makes a room the same for the same seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from pipeline.rooms.model import Amount, Criterion, Document, category_folder
from pipeline.rooms.synthetic.templates import Names, Writer, slug


class Party(NamedTuple):
    """The other side of a document: a counterparty, or a person signing for themselves."""

    short: str  # the name memos use, e.g. "Bluestone Logistics"
    legal: str  # the name in the preamble, e.g. "Bluestone Logistics LLC"
    slug: str  # its folder and file-name part


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
        """File a document under its category folder; a taken path gets a _2, _3, ... suffix."""
        top = category_folder(category)
        base = f"{top}/{sub}/{filename}" if sub else f"{top}/{filename}"
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
        entities: Iterable[str] = (),
        any_of: Iterable[Iterable[str]] = (),
        amounts: Iterable[tuple[float, float]] = (),
        paths: Iterable[str] = (),
        forbidden: Iterable[str] = (),
        evidence: str = "",
        evidence_paths: Iterable[str] = (),
        trap: bool = False,
    ) -> None:
        """Add one rubric criterion; its id is ``<issue id>-<kind>`` (numbered when repeated)."""
        cid = f"{iid}-{kind}"
        n = 2
        while cid in self.ids:
            cid = f"{iid}-{kind}{n}"
            n += 1
        self.ids.add(cid)
        paths = list(paths)
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
                paths=paths,
                forbidden=list(forbidden),
                evidence=evidence,
                # evidence defaults to the cited documents
                evidence_paths=list(evidence_paths) or list(paths),
            )
        )

    def date(self) -> str:
        return self.writer.date()

    def date_pair(self) -> tuple[str, str]:
        return self.writer.date_pair()

    def person(self) -> str:
        return self.names.person()

    def counterparty(self) -> Party:
        """A new counterparty: (short name, legal name, folder slug)."""
        short, legal = self.names.company()
        return Party(short, legal, slug(short))

    def permit_id(self) -> str:
        """A fresh permit number, unique in the room (permit numbers are criteria entities)."""
        while True:
            pid = f"{self.rng.choice(['AQ', 'WD', 'SW', 'HW'])}-{self.rng.randrange(10000, 99999)}"
            if pid not in self.ids:
                self.ids.add(pid)
                return pid
