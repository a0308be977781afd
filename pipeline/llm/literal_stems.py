"""The literal text every match of a regular expression must contain: a cheap, exact prefilter.

The extractive reader scores every sentence of every document it reads
against its risk patterns; almost none match (about 1% of a generated room's
sentences), yet each ``re.search`` walks the sentence. A pattern whose every
top-level alternative opens (after ``\\b``) with literal text can only match a
sentence that contains one of those texts, which ``str.__contains__`` checks
far faster than the regex engine runs.

``literal_stems`` reads those opening texts off the pattern's source; it
returns None (no prefilter) for any alternative it cannot read one from, so a
pattern it does not understand is always searched in full. The check is exact
for ASCII text of a pattern compiled with ``re.IGNORECASE``: lower-casing an
ASCII string is what case-insensitive matching does to its letters.
Non-ASCII text (where case folding has exceptions) is searched in full.
"""

from __future__ import annotations

import re

_QUANTIFIERS = "?*+{"
_SPECIAL = "\\[](){}.|^$?*+"


def _alternatives(pattern: str) -> list[str]:
    """Split a pattern at its top-level ``|`` (not inside groups or classes)."""
    parts, depth, in_class, start, i = [], 0, False, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


def _opening_literal(alternative: str) -> str:
    text = alternative
    while text.startswith("\\b"):
        text = text[2:]
    out = []
    for i, c in enumerate(text):
        if c in _SPECIAL:
            break
        if i + 1 < len(text) and text[i + 1] in _QUANTIFIERS:
            break  # this character is optional or repeated: the literal ends before it
        out.append(c)
    return "".join(out)


def literal_stems(pattern: str) -> tuple[str, ...] | None:
    """Lower-cased texts one of which every match of ``pattern`` contains; None if unknown."""
    stems = []
    for alternative in _alternatives(pattern):
        stem = _opening_literal(alternative)
        if not stem:
            return None
        stems.append(stem.lower())
    return tuple(dict.fromkeys(stems))


class Prefiltered:
    """A case-insensitive pattern searched only in ASCII text that holds one of its literal stems."""

    def __init__(self, pattern: str) -> None:
        self.regex = re.compile(pattern, re.IGNORECASE)
        self.stems = literal_stems(pattern)

    def search(self, text: str, lowered: str | None) -> bool:
        """Does the pattern match ``text``? ``lowered``: ``text.lower()`` if ``text`` is ASCII, else None."""
        if lowered is not None and self.stems is not None and not any(s in lowered for s in self.stems):
            return False
        return self.regex.search(text) is not None
