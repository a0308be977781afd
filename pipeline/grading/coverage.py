"""Coverage: which of a room's probes reached any model during a trajectory.

Model inputs are the root's messages (system prompt, task, every REPL output
it was shown) and every subagent prompt, depth-2 children included. Probes
are matched by hash at sentence starts (pipeline.rooms.probes), so the cost
is linear in the input size and independent of the probe count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from pipeline.harness.trace import Trace
from pipeline.rooms.model import Room
from pipeline.rooms.probes import ProbeIndex


def root_inputs(trace: Trace) -> Iterator[str]:
    for turn in trace.turns:
        for m in turn.new_messages:
            if not m.get("example"):  # the worked example is about another room
                yield m.get("content") or ""


def subagent_inputs(trace: Trace) -> Iterator[str]:
    for call in trace.subcalls:
        yield call.prompt
    for child in trace.children:  # a child RLM is a subagent of this root
        yield from root_inputs(child)
        yield from subagent_inputs(child)


def coverage_rows(trace: Trace, room: Room, index: ProbeIndex | None = None) -> list[dict]:
    """Rows for the coverage table: scope x (total | folder | category)."""
    index = index or ProbeIndex(room.probes)
    docs = {d.path: d for d in room.documents}
    seen = {"root": index.seen(root_inputs(trace)), "subagent": index.seen(subagent_inputs(trace))}
    seen["all"] = seen["root"] | seen["subagent"]
    rows = []
    for scope, ids in seen.items():
        groups: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for p in room.probes:
            d = docs.get(p.path)
            keys = [("total", "")]
            if d is not None:
                keys += [("folder", d.folder), ("category", d.category)]
            hit = p.probe_id in ids
            for k in keys:
                groups[k][0] += 1
                groups[k][1] += hit
        for (grouping, value), (n, s) in sorted(groups.items()):
            rows.append(
                {
                    "trajectory_id": trace.trajectory_id,
                    "scope": scope,
                    "grouping": grouping,
                    "group_value": value,
                    "n_probes": n,
                    "n_seen": s,
                }
            )
    return rows
