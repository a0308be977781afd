"""The report's cost figures (the reference report's Figures 8 and 9a), drawn like pipeline.report.plots.

Each function takes rows of the marts, writes one PNG and returns its path,
or None when there is nothing to draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from pipeline.report.plots import _colours, _save


def score_vs_cost(rows: Sequence[dict], labels: dict[str, str], path: Path, all_free: bool) -> Path | None:
    """Figure 8: mean headline score against mean USD per trajectory, one point per (room, policy)."""
    pts = [r for r in rows if r.get("score") is not None and r.get("cost_usd") is not None]
    if not pts:
        return None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    policies = list(dict.fromkeys(r["policy_id"] for r in pts))
    colours = _colours(policies)
    for pid in policies:
        mine = [r for r in pts if r["policy_id"] == pid]
        ax.scatter(
            [float(r["cost_usd"]) for r in mine],
            [100 * float(r["score"]) for r in mine],
            s=30,
            alpha=0.75,
            color=colours[pid],
            label=f"{labels.get(pid, pid)} ({len(mine)} rooms)",
        )
        if len(pts) <= 30:  # room names while they stay legible
            for r in mine:
                ax.annotate(r["room_id"], (float(r["cost_usd"]), 100 * float(r["score"])), fontsize=7,
                            xytext=(4, 3), textcoords="offset points")  # fmt: skip
    ax.set_ylim(-3, 103)
    # from zero: the spread of cost across rooms reads against its size
    ax.set_xlim(left=0, right=max(float(r["cost_usd"]) for r in pts) * 1.15 or 1.0)
    ax.set_xlabel(
        "mean cost per trajectory (USD)" + (" — all 0: embedded models, no price" if all_free else "")
    )
    ax.set_ylabel("mean headline score (%)")
    ax.set_title("Score vs generation cost, one point per room and policy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path)


def root_token_share(rows: Sequence[dict], labels: dict[str, str], path: Path) -> Path | None:
    """Figure 9a: the root's share of input and of output tokens, per policy and purpose."""
    pts = [r for r in rows if r.get("root_share_in") is not None or r.get("root_share_out") is not None]
    if not pts:
        return None
    fig = Figure(figsize=(7, max(2.6, 0.5 * len(pts) + 1.4)))
    ax = fig.subplots()
    ys = list(range(len(pts)))
    names = [f"{labels.get(r['policy_id'], r['policy_id'])} · {r['purpose']}" for r in pts]
    for offset, key, colour, label in (
        (-0.18, "root_share_in", "#1f77b4", "input (prompt) tokens"),
        (0.18, "root_share_out", "#ff7f0e", "output (completion) tokens"),
    ):
        values = [100 * float(r.get(key) or 0.0) for r in pts]
        ax.barh([y + offset for y in ys], values, height=0.34, color=colour, label=label)
        for y, v in zip(ys, values, strict=True):
            ax.text(v, y + offset, f" {v:.1f}%", va="center", fontsize=7)
    ax.set_yticks(ys, names, fontsize=8)
    ax.set_xlim(0, 112)
    ax.set_xlabel("root's share of all tokens (%); the rest went to subagents")
    ax.set_title("Root's share of input and output tokens")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)
