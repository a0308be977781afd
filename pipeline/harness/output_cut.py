"""The one cutter for text shown to the root: printed output, tool results, error messages.

Whatever is cut keeps a visible marker with the number of characters left
out, so the root knows there was more (and can print less next time).
"""

from __future__ import annotations


def cut(text: str, limit: int, slack: int = 0) -> str:
    """``text`` up to ``limit`` characters plus a marker for the rest.

    Text up to ``limit + slack`` characters comes back whole: ``slack`` leaves
    room for a marker an earlier cut (the worker's own) already appended.
    """
    if len(text) <= limit + slack:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters]"
