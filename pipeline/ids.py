"""Stable ids and content hashes: the one place that turns keys into hex digests.

Every id in the warehouse is derived from what it identifies (a sample key, a
config, a selection), so reruns find the rows they already wrote. Each caller
keeps its own prefix, separator and length, so ids written by earlier
versions stay the same.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def digest(data: str | bytes, length: int | None = 16) -> str:
    """Hex SHA-256 of ``data``, cut to ``length`` characters (None: all 64)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    hexed = hashlib.sha256(raw).hexdigest()
    return hexed if length is None else hexed[:length]


def stable_id(*parts: Any, prefix: str = "", sep: str = "|", length: int = 12) -> str:
    """``prefix`` + digest of the parts joined by ``sep``: an id from its key."""
    return prefix + digest(sep.join(str(p) for p in parts), length)


def content_hash(obj: Any, length: int = 16) -> str:
    """Digest of a JSON-able object, independent of key order."""
    return digest(json.dumps(obj, sort_keys=True, default=str), length)


def bucket(text: str, buckets: int) -> int:
    """A stable integer in [0, buckets) for ``text`` (splits, seeds)."""
    return int(digest(text, 8), 16) % buckets
