"""Small statistics the evaluation, judge-agreement and report code share.

Rooms, not trajectories, are the unit of resampling: trajectories of one room
are correlated (same documents, same rubric), so the callers first average
each room's trajectories and pass one value per room. Intervals are
percentile bootstrap intervals with a fixed seed, so a rerun of the same
evaluation reports the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def _finite(values: Sequence[float | None]) -> np.ndarray:
    arr = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return arr[np.isfinite(arr)]


def bootstrap_mean_ci(
    values: Sequence[float | None], n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``values`` (one per room) and its percentile-bootstrap (1 - alpha) interval.

    None and NaN values are dropped first. A single value gives a zero-width
    interval (nothing to resample); no values at all is a ``ValueError``.
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    arr = _finite(values)
    if arr.size == 0:
        raise ValueError("bootstrap_mean_ci: no finite values to average")
    mean = float(arr.mean())
    rng = np.random.default_rng(seed)
    # One matrix of indices: n_boot resamples of the rooms, with replacement.
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    means = arr[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    # Guard against float noise putting the mean a hair outside a degenerate interval.
    return mean, float(min(lo, mean)), float(max(hi, mean))


def paired_diff_ci(
    a: Mapping[Hashable, float | None],
    b: Mapping[Hashable, float | None],
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float, int]:
    """Mean of a[room] - b[room] over rooms present (and finite) in both, with its bootstrap interval.

    Pairing by room removes the between-room variance (some rooms are simply
    harder), which is what makes a lift on 20 rooms measurable at all.
    Returns (mean_diff, lo, hi, n_rooms).
    """
    diffs = []
    for room in sorted(set(a) & set(b), key=str):
        x, y = a[room], b[room]
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue
        diffs.append(float(x) - float(y))
    if not diffs:
        raise ValueError("paired_diff_ci: no room has a finite value in both a and b")
    mean, lo, hi = bootstrap_mean_ci(diffs, n_boot=n_boot, alpha=alpha, seed=seed)
    return mean, lo, hi, len(diffs)


def pearson(x: Sequence[float | None], y: Sequence[float | None]) -> float | None:
    """Pearson correlation over the pairs where both values are finite; None when undefined.

    Undefined means fewer than two usable pairs or a constant variable.
    """
    if len(x) != len(y):
        raise ValueError(f"pearson: x has {len(x)} values, y has {len(y)}")
    xs = np.array([np.nan if v is None else float(v) for v in x], dtype=float)
    ys = np.array([np.nan if v is None else float(v) for v in y], dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    if xs.size < 2:
        return None
    dx, dy = xs - xs.mean(), ys - ys.mean()
    denom = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    if denom == 0.0:
        return None
    return float((dx * dy).sum() / denom)


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' pass/fail labels on the same items; None when undefined.

    Undefined: no items, or chance agreement of 1 (both raters gave one and
    the same label to every item, so agreement beyond chance cannot be told).
    """
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: a has {len(a)} labels, b has {len(b)}")
    n = len(a)
    if n == 0:
        return None
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    neither = sum(1 for x, y in zip(a, b, strict=True) if not x and not y)
    observed = (both + neither) / n
    pa, pb = sum(bool(x) for x in a) / n, sum(bool(y) for y in b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)
