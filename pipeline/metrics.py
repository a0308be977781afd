"""The evaluation's metrics in one place: the behaviour metrics and the headline line.

`evaluate` stores one `evaluations` row per (policy, metric); the behaviour
metrics are the reference report's Table 1, read from the `policy_summary`
view under the same names. The report shows them with these labels and
formats, and both `evaluate` and `nightly` print `headline()`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

# How a value is shown: a share as a percentage, a count rounded, a number to 1 or 2 decimals.
Kind = Literal["pct", "int", "num1", "num2"]


@dataclass(frozen=True)
class Metric:
    name: str  # column of policy_summary and `metric` of evaluations
    label: str
    kind: Kind


# Behaviour metrics of the reference report's Table 1, in the order the report lists them.
BEHAVIOUR: tuple[Metric, ...] = (
    Metric("subcalls", "subagent calls per trajectory", "num1"),
    Metric("delegated_chars", "characters delegated to subagents", "int"),
    Metric("memo_chars", "memo length (characters)", "int"),
    Metric("findings_carried", "share of subagent findings carried into the memo", "pct"),
    Metric(
        "memo_before_delegation_done",
        "share of memos begun before the last subagent call returned",
        "pct",
    ),
    Metric("budget_used", "share of the subagent token budget spent", "pct"),
    Metric("calls_size_corr", "correlation of subagent calls with room size", "num2"),
    Metric("recall", "recall: share of non-trap criteria passed", "pct"),
    Metric("precision", "precision: claims the room supports, above chance", "pct"),
    Metric("trap_failures", "trap criteria failed per trajectory", "num2"),
)
BEHAVIOUR_NAMES: tuple[str, ...] = tuple(m.name for m in BEHAVIOUR)


def by_policy(rows: Iterable[dict]) -> dict[str, dict[str, dict]]:
    """Evaluation rows as policy_id -> metric -> row, policies in the order they first appear."""
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["policy_id"], {})[r["metric"]] = r
    return out


def base_first(policy_ids: Iterable[str], base_id: str | None) -> list[str]:
    """The base policy first, then the others by id: the order every table of an evaluation uses."""
    return sorted(policy_ids, key=lambda p: (p != base_id, p))


def withheld_reason(rows: list[dict]) -> str:
    """Why an evaluation withheld its lift: each policy's share of episodes with no reply from the root's server."""
    shares = ", ".join(
        f"{pid} {m['serving_failed_rate']['value']:.0%}"
        for pid, m in by_policy(rows).items()
        if "serving_failed_rate" in m
    )
    return (
        f"held-out episodes that got no reply from the root's server: {shares}; "
        "that measures the server, not the policy: rerun evaluate once the server keeps up"
    )


def mde_text(mde: float | None) -> str:
    """The minimum detectable effect as printed: NaN when every pair scored the same."""
    if mde is None or math.isnan(mde):
        return "not estimable (every pair scored the same: no spread to power a test)"
    return f"{mde:.3f} (80% power)"


def headline(rows: list[dict]) -> str:
    """One line per policy: headline score [CI], and lift [CI] for candidates."""
    out = []
    policies = by_policy(rows)
    k = next((m["seeds_per_room"]["value"] for m in policies.values() if "seeds_per_room" in m), None)
    for pid, m in policies.items():
        pr = m.get("score")
        line = (
            f"{pid}: held-out score {pr['value']:.3f} [95% CI {pr['ci_low']:.3f}, {pr['ci_high']:.3f}]"
            if pr
            else pid
        )
        if "lift" in m:
            lf = m["lift"]
            line += f"; lift vs base {lf['value']:+.3f} [95% CI {lf['ci_low']:+.3f}, {lf['ci_high']:+.3f}]"
        if "lift_mde" in m:
            line += f"; minimum detectable effect {mde_text(m['lift_mde']['value'])}"
        if "sessions" in m and pr:
            line += (
                f"; {pr['n_rooms']} rooms x {k:.0f} seed(s), {m['sessions']['value']:.0f} server session(s)"
                if k
                else f"; {m['sessions']['value']:.0f} server session(s)"
            )
        if "distinct_programs" in m and (k is None or k > 1):  # one episode per room is one program
            line += f"; {m['distinct_programs']['value']:.1f} distinct programs per room"
        if "programs_overall" in m:
            po = m["programs_overall"]
            line += f"; {po['value']:.0f} distinct programs in its {po['n_rooms']} episodes"
        if "lift_submitted" in m:
            ls = m["lift_submitted"]
            line += (
                f"; among submitted episodes {ls['value']:+.3f} [95% CI {ls['ci_low']:+.3f}, {ls['ci_high']:+.3f}]"
                f" over {ls['n_rooms']} rooms"
            )
        if "lift_withheld" in m:
            line += f"; lift withheld ({withheld_reason(rows)})"
        out.append(line)
    return "\n".join(out)
