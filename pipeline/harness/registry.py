"""The harnesses by name: ``harness.kind`` -> the ``"module:attr"`` of its episode function.

Strings, resolved on use: this module imports no harness, so the harnesses
can import what they share (``pipeline.harness.episode``) without a cycle,
and prompt variants check their ``harness:`` field against these same names.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from typing import Any

from pipeline.config import ConfigError

HARNESSES: dict[str, str] = {
    "rlm": "pipeline.harness.root:run_episode",
    "toolloop": "pipeline.harness.toolloop:run_toolloop_episode",
}


def episode_function(kind: str) -> Callable[..., Any]:
    """The episode coroutine function of harness ``kind`` (imported now, not before)."""
    if kind not in HARNESSES:
        raise ConfigError(f"harness.kind: unknown harness {kind!r} (known: {', '.join(sorted(HARNESSES))})")
    return pkgutil.resolve_name(HARNESSES[kind])
