"""Coverage probes: spans anchored at sentence starts, looked up by hash.

A probe is the first ``PROBE_CHARS`` characters of a sentence (a piece of
text after ". " or a line break) that occurs exactly once in the room. To
tell which probes a model input contains, cut the input the same way and
look each piece's prefix up in a hash set: the cost grows with the input
size only, never with the number of probes (multi-pattern automata slow
down as 100k+ probes are added; this does not).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable

from pipeline.rooms.model import Document, Probe

PROBE_CHARS = 48
TOKENS_PER_PROBE = 500


def sentence_keys(text: str) -> list[str]:
    """Prefixes of every sentence long enough to hold a probe, in order."""
    return [p[:PROBE_CHARS] for p in _pieces(text) if len(p) >= PROBE_CHARS]


def _pieces(text: str) -> list[str]:
    return text.replace("\n", ". ").split(". ")


# The breaks _pieces cuts at, in the original text: ". " is two characters, a line break one.
_BREAK = re.compile(r"\. |\n")


def _anchored(text: str) -> list[tuple[int, str]]:
    """(offset, key) of every sentence prefix, with offsets into ``text``.

    The pieces are _pieces(text)'s; offsets come from the breaks in the text
    itself, since _pieces widens each line break to ". ".
    """
    out = []
    pos = 0
    for brk in [*_BREAK.finditer(text), None]:
        end = brk.start() if brk else len(text)
        if end - pos >= PROBE_CHARS:
            out.append((pos, text[pos : pos + PROBE_CHARS]))
        if brk:
            pos = brk.end()
    return out


def sample_probes(
    documents: Iterable[Document], seed: int, tokens_per_probe: int = TOKENS_PER_PROBE
) -> list[Probe]:
    """At least one probe per document and about one per ``tokens_per_probe`` tokens.

    Candidates are spread evenly through each document (one per stratum) so
    that reading only a document's first page covers only its first probes.
    Keys that occur more than once in the room (boilerplate) are never used,
    so seeing one document cannot mark another document's probe. A document
    too short to hold one gets its whole text (whitespace-stripped) as probe,
    matched by substring (see ProbeIndex).
    """
    documents = list(documents)
    rng = random.Random(seed)
    anchored = {d.path: _anchored(d.text) for d in documents}
    counts = Counter(k for spans in anchored.values() for _, k in spans)
    probes: list[Probe] = []
    for d in documents:
        spans = [(o, k) for o, k in anchored[d.path] if counts[k] == 1]
        n = max(1, math.ceil(d.n_tokens / tokens_per_probe))
        if not spans:
            text = d.text.strip()[: PROBE_CHARS * 2] or d.path
            probes.append(Probe(len(probes), d.path, max(0, d.text.find(text)), text))
            continue
        n = min(n, len(spans))
        for i in range(n):
            lo, hi = i * len(spans) // n, (i + 1) * len(spans) // n
            off, key = spans[rng.randrange(lo, max(lo + 1, hi))]
            probes.append(Probe(len(probes), d.path, off, key))
    return probes


class ProbeIndex:
    """Which probes a set of model inputs contains."""

    def __init__(self, probes: Iterable[Probe]):
        self.probes = list(probes)
        self.by_key: dict[str, int] = {}
        self.short: list[Probe] = []  # probes of tiny documents, matched by substring
        for p in self.probes:
            if len(p.text) == PROBE_CHARS and p.text not in self.by_key:
                self.by_key[p.text] = p.probe_id
            else:
                self.short.append(p)
        self._keys = self.by_key.keys()

    def seen(self, texts: Iterable[str]) -> set[int]:
        found: set[int] = set()
        for text in texts:
            if not text:
                continue
            keys = {p[:PROBE_CHARS] for p in _pieces(text) if len(p) >= PROBE_CHARS}
            for k in self._keys & keys:
                found.add(self.by_key[k])
            for p in self.short:
                if p.text in text:
                    found.add(p.probe_id)
        return found
