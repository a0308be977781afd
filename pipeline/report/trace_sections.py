"""The report's section that leads to trajectory pages: best and worst per room, each rejection reason."""

from __future__ import annotations

from collections import Counter

from pipeline.report.formatting import MISSING, pct
from pipeline.report.render import Link, Section, Table
from pipeline.report.trace_list import reason
from pipeline.report.trace_pages import DIR


def _link(row: dict, links: dict[str, str]) -> Link | str:
    text = f"{row['trajectory_id']} ({pct(row.get('score'))})"
    href = links.get(row["trajectory_id"])
    return Link(text, href) if href else text


def trajectories_to_read(rows: list[dict], labels: dict[str, str], links: dict[str, str]) -> Section:
    """Per (room, policy, purpose): the best and the worst graded trajectory; per filter reason: a count and examples."""
    s = Section("Trajectories to read")
    if not links:
        s.blocks.append("No trajectory pages yet: they are written for held-out and filtered trajectories.")
        return s
    s.blocks.append(
        Link(
            "All trajectories, with filters (policy, room, status, score, filter decision)",
            f"{DIR}/index.html",
        )
    )
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["trajectory_id"] in links and r.get("score") is not None:
            groups.setdefault((r.get("room_name") or r["room_id"], r["policy_id"], r["purpose"]), []).append(
                r
            )
    table = Table(["room", "policy", "purpose", "trajectories", "best (score)", "worst (score)"], [],
                  "Best and worst trajectory by headline score per room, policy and purpose; each links to its page.")  # fmt: skip
    for (room, pid, purpose), rs in sorted(groups.items()):
        ranked = sorted(rs, key=lambda r: (-r["score"], r["trajectory_id"]))
        worst = _link(ranked[-1], links) if len(ranked) > 1 else MISSING
        table.rows.append([room, labels.get(pid, pid), purpose, str(len(rs)), _link(ranked[0], links), worst])
    if table.rows:
        s.blocks.append(table)
    decided = [r for r in rows if r.get("filter_reason") is not None]
    counts = Counter(reason(r) for r in decided)
    reasons = Table(["filter decision", "trajectories", "list", "example", "example", "example"], [],
                    "Each decision of the newest selection: the filtered list and up to three of its trajectories.")  # fmt: skip
    for why, n in sorted(counts.items(), key=lambda kv: (kv[0] != "accepted", kv[0])):
        mine = sorted((r for r in decided if reason(r) == why), key=lambda r: r["trajectory_id"])[:3]
        examples: list[Link | str] = [_link(r, links) for r in mine]
        examples += [MISSING] * (3 - len(examples))
        reasons.rows.append([why, str(n), Link(f"all {n}", f"{DIR}/index.html#reason={why}"), *examples])
    if reasons.rows:
        s.blocks.append(reasons)
    return s
