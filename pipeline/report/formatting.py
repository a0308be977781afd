"""How the report writes numbers: percentages, intervals, point differences, counts.

A missing value (None) is always an en dash, so a table with gaps still lines up.
"""

from __future__ import annotations

from typing import Any

from pipeline.metrics import Kind

MISSING = "–"


def pct(v: float | None) -> str:
    return MISSING if v is None else f"{100 * v:.1f}%"


def pct_ci(v: float | None, lo: float | None, hi: float | None) -> str:
    """A rate with its interval in brackets, both in percent."""
    if v is None:
        return MISSING
    if lo is None or hi is None:
        return pct(v)
    return f"{100 * v:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def pts_ci(v: float | None, lo: float | None, hi: float | None) -> str:
    """A difference of two rates in percentage points."""
    if v is None:
        return MISSING
    s = f"{100 * v:+.1f} pts"
    return s if lo is None or hi is None else f"{s} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def fmt(v: Any, kind: Kind) -> str:
    """A value shown as its metric's kind (pipeline.metrics.Kind)."""
    if v is None:
        return MISSING
    if kind == "pct":
        return pct(v)
    if kind == "int":
        return f"{round(float(v)):,}"
    if kind == "num1":
        return f"{float(v):.1f}"
    return f"{float(v):.2f}"
