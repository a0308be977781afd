"""Train / held-out assignment of rooms by a recorded, deterministic rule.

Rule: a room is held out when ``int(sha256(name)[:8], 16) % 1000 <
round(heldout_fraction * 1000)`` (hex digest of the UTF-8 name). The rule
depends on the name alone, so a room keeps its split however many other rooms
exist, on every machine and in every run.
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.ids import bucket


def _bucket(name: str) -> int:
    return bucket(name, 1000)


def _check(heldout_fraction: float) -> None:
    if not 0.0 <= heldout_fraction <= 1.0:
        raise ValueError(f"heldout_fraction must be within [0, 1], got {heldout_fraction!r}")


def split_for(name: str, heldout_fraction: float) -> str:
    """ "heldout" when the name's sha256 bucket (0-999) is below fraction x 1000, else "train"."""
    _check(heldout_fraction)
    return "heldout" if _bucket(name) < round(heldout_fraction * 1000) else "train"


def assign_splits(names: Iterable[str], heldout_fraction: float) -> dict[str, str]:
    """``split_for`` of every name, corrected so both splits are non-empty.

    With two or more rooms and 0 < heldout_fraction < 1, if the rule puts
    every room in one split, the room closest to the threshold moves: the
    lowest bucket becomes held out (when none is), or the highest bucket
    becomes train (when all are); ties break by name. A fraction of exactly 0
    or 1 is taken as an explicit wish and never corrected.
    """
    _check(heldout_fraction)
    names = list(dict.fromkeys(names))
    out = {n: split_for(n, heldout_fraction) for n in names}
    if len(names) < 2 or heldout_fraction in (0.0, 1.0):
        return out
    values = set(out.values())
    if values == {"train"}:
        out[min(names, key=lambda n: (_bucket(n), n))] = "heldout"
    elif values == {"heldout"}:
        out[max(names, key=lambda n: (_bucket(n), n))] = "train"
    return out
