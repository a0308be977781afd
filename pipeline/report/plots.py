"""The report's figures, drawn with matplotlib's object API onto PNG files.

``matplotlib.figure.Figure`` is used directly rather than pyplot: no global
figure state and no GUI backend, so it works headless and never leaks
figures. Each function takes plain rows, writes one PNG and returns its path,
or returns None when there is nothing to draw (the report then says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pipeline.stats import pearson

DPI = 110
# Coverage 0 cannot sit on a log axis; such points are drawn at this floor (and the axis label says so).
COVERAGE_FLOOR = 1e-3


def _colours(keys: Sequence[str]) -> dict[str, Any]:
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def score_vs_coverage(rows: Sequence[dict], labels: dict[str, str], path: Path) -> Path | None:
    """One point per graded trajectory: headline score against probe coverage (log x), colour = policy."""
    pts = [r for r in rows if r.get("score") is not None and r.get("coverage") is not None]
    if not pts:
        return None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    policies = list(dict.fromkeys(r["policy_id"] for r in pts))
    colours = _colours(policies)
    for pid in policies:
        mine = [r for r in pts if r["policy_id"] == pid]
        ax.scatter(
            [max(float(r["coverage"]), COVERAGE_FLOOR) for r in mine],
            [100 * float(r["score"]) for r in mine],
            s=22,
            alpha=0.7,
            color=colours[pid],
            label=f"{labels.get(pid, pid)} (n={len(mine)})",
        )
    ax.set_xscale("log")
    ax.set_xlim(COVERAGE_FLOOR * 0.8, 1.25)
    ax.set_ylim(-3, 103)
    ax.set_xlabel(f"probe coverage (log scale; 0 drawn at {COVERAGE_FLOOR:g})")
    ax.set_ylabel("headline score (%)")
    ax.set_title("Pass rate vs coverage, one point per trajectory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


def heldout_rooms(
    rooms: Sequence[str], base: dict[str, float], cand: dict[str, float], labels: tuple[str, str], path: Path
) -> Path | None:
    """Dumbbell chart: base and candidate mean headline score per held-out room, sorted by the base's."""
    both = [r for r in rooms if r in base and r in cand]
    if not both:
        return None
    both.sort(key=lambda r: base[r])
    fig = Figure(figsize=(7, max(2.5, 0.38 * len(both) + 1.3)))
    ax = fig.subplots()
    ys = list(range(len(both)))
    for y, r in zip(ys, both, strict=True):
        b, c = 100 * base[r], 100 * cand[r]
        ax.plot([b, c], [y, y], color="#999999", lw=1.5, zorder=1)
    # Base as a larger hollow ring, so a room where both score the same still shows both markers.
    ax.scatter(
        [100 * base[r] for r in both], ys, s=90, facecolors="none", edgecolors="#1f77b4", lw=2, zorder=2,
        label=labels[0],
    )  # fmt: skip
    ax.scatter([100 * cand[r] for r in both], ys, s=30, color="#d62728", zorder=3, label=labels[1])
    ax.set_yticks(ys, both, fontsize=8)
    ax.set_xlim(-3, 103)
    ax.set_xlabel("mean headline score (%)")
    ax.set_title("Held-out rooms: base vs SFT")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


FUNNEL_STEPS = [
    ("sampled", "sampled"),
    ("finished", "finished"),
    ("passed_score", "score"),
    ("passed_coverage", "coverage"),
    ("accepted", "accepted"),
]


def funnel(row: dict, path: Path) -> Path | None:
    """Horizontal bars: how many trajectories survive each rule of the rejection filter."""
    if not row or not row.get("sampled"):
        return None
    values = [int(row.get(k) or 0) for k, _ in FUNNEL_STEPS]
    names = [name for _, name in FUNNEL_STEPS]
    fig = Figure(figsize=(7, 3.2))
    ax = fig.subplots()
    ys = list(range(len(values)))[::-1]
    ax.barh(ys, values, color=["#7f7f7f", "#1f77b4", "#ff7f0e", "#9467bd", "#2ca02c"])
    for y, v in zip(ys, values, strict=True):
        ax.text(v, y, f" {v} ({100 * v / values[0]:.0f}%)", va="center", fontsize=8)
    ax.set_yticks(ys, names)
    ax.set_xlim(0, values[0] * 1.25)
    ax.set_xlabel("trajectories")
    ax.set_title("Rejection funnel")
    return _save(fig, path)


def training_loss(logs: dict[str, Sequence[dict]], path: Path) -> Path | None:
    """Training loss (lines) and eval loss (markers) per optimizer step, one colour per training run."""
    logs = {
        k: v
        for k, v in logs.items()
        if any(r.get("loss") is not None or r.get("eval_loss") is not None for r in v)
    }
    if not logs:
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    colours = _colours(list(logs))
    for train_id, rows in logs.items():
        tr = [(r["step"], r["loss"]) for r in rows if r.get("loss") is not None]
        ev = [(r["step"], r["eval_loss"]) for r in rows if r.get("eval_loss") is not None]
        if tr:
            ax.plot(*zip(*tr, strict=True), color=colours[train_id], lw=1.5, label=f"{train_id} train")
        if ev:
            ax.plot(
                *zip(*ev, strict=True),
                color=colours[train_id],
                ls="--",
                marker="o",
                ms=4,
                label=f"{train_id} eval",
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("Training loss")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def delegation_vs_size(rows: Sequence[dict], labels: dict[str, str], path: Path) -> Path | None:
    """Subagent calls per trajectory against room size (tokens, log x), colour = policy; r in the legend."""
    pts = [r for r in rows if r.get("room_n_tokens") and r.get("n_subcalls") is not None]
    if not pts:
        return None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    policies = list(dict.fromkeys(r["policy_id"] for r in pts))
    colours = _colours(policies)
    for pid in policies:
        mine = [r for r in pts if r["policy_id"] == pid]
        xs = [float(r["room_n_tokens"]) for r in mine]
        ys = [float(r["n_subcalls"]) for r in mine]
        r_val = pearson(xs, ys)
        r_txt = "r undefined" if r_val is None or math.isnan(r_val) else f"r={r_val:.2f}"
        ax.scatter(xs, ys, s=22, alpha=0.7, color=colours[pid], label=f"{labels.get(pid, pid)} ({r_txt})")
    sizes = [float(r["room_n_tokens"]) for r in pts]
    # A log axis only helps when room sizes span an order of magnitude; below that it just hides the ticks.
    if max(sizes) >= 10 * min(sizes):
        ax.set_xscale("log")
        ax.set_xlabel("room size (tokens, log scale)")
    else:
        ax.set_xlabel("room size (tokens)")
    ax.set_ylabel("subagent calls per trajectory")
    ax.set_title("Delegation vs room size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


def rl_rewards(steps: dict[str, Sequence[dict]], path: Path) -> Path | None:
    """Mean reward per GRPO step with its 95% band (left) and rollout wall time per step (right)."""
    steps = {k: v for k, v in steps.items() if any(r.get("reward_mean") is not None for r in v)}
    if not steps:
        return None
    fig = Figure(figsize=(10, 4))
    ax, ax2 = fig.subplots(1, 2)
    colours = _colours(list(steps))
    for rl_id, rows in steps.items():
        xs = [r["step"] for r in rows]
        ax.plot(xs, [r["reward_mean"] for r in rows], color=colours[rl_id], marker="o", ms=4, label=rl_id)
        ax.fill_between(
            xs,
            [r["reward_band_low"] for r in rows],
            [r["reward_band_high"] for r in rows],
            color=colours[rl_id],
            alpha=0.2,
        )
        ax2.plot(xs, [r["rollout_s"] for r in rows], color=colours[rl_id], marker="o", ms=4, label=rl_id)
    for a, title, ylabel in ((ax, "Reward per step", "mean reward (judge headline)"),
                             (ax2, "Rollout wall time per step", "seconds")):  # fmt: skip
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
        a.set_xlabel("step")
        a.set_ylabel(ylabel)
        a.set_title(title)
        a.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
