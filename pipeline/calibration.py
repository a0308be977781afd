"""`calibrate`: the champion rule against itself (A/A), on a policy's stored held-out episodes.

A rule that promotes noise promotes a policy over itself. This takes one
policy's graded held-out episodes, keeps their structure (rooms, and the seeds
nested in them), and many times over splits each room's episodes at random
into two halves, A and A', pairs them seed by seed, and applies the champion
rule (pipeline.stats.cluster_paired_ci, pipeline.champion.beats) to A' against
A. The share of splits the rule would promote is its false-promotion rate on
this data; the one-sided level of the interval is 2.5%, and the rule's minimum
effect pushes it lower.

    result = aa_calibration(con, policy_id, rooms, min_effect)   # AAResult: rate, trials, rooms, pairs
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import duckdb
import numpy as np

from pipeline import champion, stats


@dataclass(frozen=True)
class AAResult:
    policy_id: str
    rate: float  # share of A/A splits the rule promoted
    trials: int
    n_rooms: int
    pairs_per_room: float  # A/A pairs per room: half the room's episodes
    mean_mde: float  # the minimum detectable effect of an A/A split (80% power)


def episode_scores(
    con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str]
) -> dict[str, list[float]]:
    """room -> the policy's held-out scores, one per episode, in sample-index order."""
    rows = con.execute(
        "select room_id, score from trajectory_scores where policy_id = ? and purpose = 'eval' "
        "and list_contains(?, room_id) and score is not null order by room_id, sample_index",
        [policy_id, rooms],
    ).fetchall()
    out: dict[str, list[float]] = {}
    for room, score in rows:
        out.setdefault(room, []).append(float(score))
    return out


def aa_calibration(
    scores: dict[str, list[float]],
    policy_id: str,
    min_effect: float,
    trials: int = 500,
    n_boot: int = 500,
    seed: int = 0,
) -> AAResult:
    """The rule's false-promotion rate over ``trials`` random A/A splits of ``scores`` (room -> episodes)."""
    usable = {r: np.asarray(v) for r, v in scores.items() if len(v) >= 2}
    if len(usable) < champion.MIN_LIFT_ROOMS:
        raise ValueError(
            f"calibrate: {policy_id} has two or more held-out episodes in {len(usable)} room(s); "
            f"the rule needs {champion.MIN_LIFT_ROOMS} (run evaluate first)"
        )
    rng = np.random.default_rng(seed)
    promoted, mdes = 0, []
    for t in range(trials):
        diffs = {}
        for room, v in usable.items():
            order = rng.permutation(v.size)
            half = v.size // 2
            diffs[room] = list(v[order[half : 2 * half]] - v[order[:half]])
        lift = stats.cluster_paired_ci(diffs, n_boot=n_boot, seed=seed + t)
        mdes.append(lift["mde"])
        row = {"ci_low": lift["lo"], "n_rooms": lift["n_rooms"]}
        promoted += champion.beats(row, min_effect)
    return AAResult(
        policy_id=policy_id,
        rate=promoted / trials,
        trials=trials,
        n_rooms=len(usable),
        pairs_per_room=float(np.mean([v.size // 2 for v in usable.values()])),
        mean_mde=float(np.mean(mdes)),
    )


def print_calibration(result: AAResult, min_effect: float, max_rate: float = 0.05) -> int:
    """`calibrate`'s report; 1 when the false-promotion rate is above ``max_rate``."""
    print(
        f"A/A: {result.policy_id} against itself, {result.trials} random splits of its held-out episodes "
        f"({result.n_rooms} rooms, {result.pairs_per_room:.1f} pairs per room): the rule (lower end of the "
        f"95% interval above {min_effect:.3f}) promoted {result.rate:.1%}; minimum detectable effect of a "
        f"split {result.mean_mde:.3f}"
    )
    if result.rate > max_rate:
        print(f"calibrate: false-promotion rate {result.rate:.1%} is above {max_rate:.0%}", file=sys.stderr)
        return 1
    return 0
