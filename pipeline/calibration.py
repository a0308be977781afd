"""`calibrate`: the champion rule against itself (A/A), on a policy's stored held-out episodes.

A rule that promotes noise promotes a policy over itself. This takes one
policy's graded held-out episodes, keeps their structure (rooms, the seeds
nested in them, and the server session each was sampled in: its
evaluation's block, ``eval_trajectories``), and many times over splits each
room's episodes at random into two halves, A and A', pairs them, and applies
the champion rule (pipeline.stats.cluster_paired_ci, pipeline.champion.beats)
to A' against A. Pairs are drawn within a session first, as an evaluation
pairs a base and a candidate episode of the same block; what is left of a
room is paired across sessions, so the session effect enters those pairs.
The share of splits the rule would promote is its false-promotion rate on
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
from pipeline.metrics import mde_text


@dataclass(frozen=True)
class AAResult:
    policy_id: str
    rate: float  # share of A/A splits the rule promoted
    trials: int
    n_rooms: int
    pairs_per_room: float  # A/A pairs per room: half the room's episodes
    mean_mde: float  # the minimum detectable effect of an A/A split (80% power)
    n_sessions: int = 1  # server sessions the episodes were sampled in ('?': not recorded, one)


def episode_scores(
    con: duckdb.DuckDBPyConnection, policy_id: str, rooms: list[str]
) -> dict[str, list[tuple[float, str]]]:
    """room -> the policy's held-out (score, session) pairs, one per episode, in sample-index order.

    The session is the one its evaluation recorded (``eval_trajectories``); an episode no evaluation
    recorded a session for counts as its own session ``?``.
    """
    rows = con.execute(
        "with sessions as (select trajectory_id, any_value(session_id) as session_id "
        "from eval_trajectories group by trajectory_id) "
        "select s.room_id, s.score, coalesce(e.session_id, '?') from trajectory_scores as s "
        "left join sessions as e using (trajectory_id) where s.policy_id = ? and s.purpose = 'eval' "
        "and list_contains(?, s.room_id) and s.score is not null order by s.room_id, s.sample_index",
        [policy_id, rooms],
    ).fetchall()
    out: dict[str, list[tuple[float, str]]] = {}
    for room, score, session in rows:
        out.setdefault(room, []).append((float(score), session))
    return out


def split_pairs(episodes: list[tuple[float, str]], rng: np.random.Generator) -> list[float]:
    """One random A/A split of a room's episodes: A' minus A per pair, pairs within a session first."""
    by_session: dict[str, list[float]] = {}
    for score, session in episodes:
        by_session.setdefault(session, []).append(score)
    diffs, left = [], []
    for session in sorted(by_session):
        v = np.asarray(by_session[session])[rng.permutation(len(by_session[session]))]
        half = v.size // 2
        diffs += list(v[half : 2 * half] - v[:half])
        left += list(v[2 * half :])
    v = np.asarray(left)[rng.permutation(len(left))]
    half = v.size // 2
    return diffs + list(v[half : 2 * half] - v[:half])


def aa_calibration(
    scores: dict[str, list[tuple[float, str]]],
    policy_id: str,
    min_effect: float,
    trials: int = 500,
    n_boot: int = 500,
    seed: int = 0,
) -> AAResult:
    """The rule's false-promotion rate over ``trials`` random A/A splits of ``scores`` (room -> (score,
    session) per episode)."""
    usable = {r: v for r, v in scores.items() if len(v) >= 2}
    if len(usable) < champion.MIN_LIFT_ROOMS:
        raise ValueError(
            f"calibrate: {policy_id} has two or more held-out episodes in {len(usable)} room(s); "
            f"the rule needs {champion.MIN_LIFT_ROOMS} (each evaluation adds evaluate.k episodes per room: "
            "evaluate the policy again, e.g. by `make rl` or `pipeline evaluate`)"
        )
    rng = np.random.default_rng(seed)
    promoted, mdes = 0, []
    for t in range(trials):
        diffs = {room: split_pairs(v, rng) for room, v in usable.items()}
        lift = stats.cluster_paired_ci(diffs, n_boot=n_boot, seed=seed + t)
        mdes.append(lift["mde"])
        row = {"ci_low": lift["lo"], "n_rooms": lift["n_rooms"]}
        promoted += champion.beats(row, min_effect)
    return AAResult(
        policy_id=policy_id,
        rate=promoted / trials,
        trials=trials,
        n_rooms=len(usable),
        pairs_per_room=float(np.mean([len(v) // 2 for v in usable.values()])),
        # a split whose pairs are all equal has no spread to state an MDE from (NaN): left out
        mean_mde=float(np.mean(finite)) if (finite := [m for m in mdes if np.isfinite(m)]) else float("nan"),
        n_sessions=len({session for v in usable.values() for _, session in v}),
    )


def print_calibration(result: AAResult, min_effect: float, max_rate: float = 0.05) -> int:
    """`calibrate`'s report; 1 when the false-promotion rate is above ``max_rate``."""
    print(
        f"A/A: {result.policy_id} against itself, {result.trials} random splits of its held-out episodes "
        f"({result.n_rooms} rooms, {result.pairs_per_room:.1f} pairs per room, {result.n_sessions} server "
        f"session(s)): the rule (lower end of the "
        f"95% interval above {min_effect:.3f}) promoted {result.rate:.1%}; minimum detectable effect of a "
        f"split {mde_text(result.mean_mde)}"
    )
    if result.rate > max_rate:
        print(f"calibrate: false-promotion rate {result.rate:.1%} is above {max_rate:.0%}", file=sys.stderr)
        return 1
    return 0
