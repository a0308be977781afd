"""Benchmark: warehouse ingest through the sampler's writer, and view latency.

    python tests/bench/bench_warehouse.py [--trajectories 1000000 --calls-per 20]

Builds synthetic traces in chunks (not timed), writes them through
stages.sample.TraceWriter (timed: column building + DuckDB insert), adds
reference grades and coverage with Arrow, then times every view in
sql/views. Targets: ingest >= 1,000,000 rows/s; every view under 2 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from pipeline import db
from pipeline.harness.trace import Subcall, Trace, Turn
from stages.sample import TraceWriter, trajectory_row


def synth(start: int, n: int, calls_per: int, n_rooms: int) -> list[tuple[Trace, str]]:
    out = []
    for i in range(start, start + n):
        room = f"room-{i % n_rooms:03d}"
        t = Trace(
            f"t{i:08d}",
            room,
            "base-bench",
            status="submitted",
            memo="Finding: consent required. " * 8,
            started_at="2026-12-01T00:00:00",
            wall_s=12.5,
            memo_started_s=10.0,
        )
        t.turns = [
            Turn(
                0,
                [{"role": "user", "content": "task"}],
                "```python\nllm_batch(p)\n```",
                "llm_batch(p)",
                "ok",
                None,
                900,
                120,
                0.0,
                9.0,
            )
        ]
        t.subcalls = [
            Subcall(
                j,
                0,
                1,
                "extractive",
                f"=== d{j}.txt ===\nThe text of document {j}.",
                f"[d{j}.txt] Consent is required.",
                None,
                40,
                12,
                0.05,
                1.0 + j * 0.01,
                1.05 + j * 0.01,
            )
            for j in range(calls_per)
        ]
        out.append((t, room))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=1_000_000)
    ap.add_argument("--calls-per", type=int, default=20)
    ap.add_argument("--chunk", type=int, default=20_000)
    ap.add_argument("--criteria-per", type=int, default=8)
    args = ap.parse_args()
    n_rooms = 200
    with tempfile.TemporaryDirectory() as tmp:
        con = db.connect(Path(tmp) / "bench.duckdb")
        con.execute(
            "insert into rooms select 'room-' || lpad(i::varchar, 3, '0'), 'room-' || lpad(i::varchar, 3, '0'),"
            " 'generated', 'train', i, '{}', '{}', 20 + i, 10000 * (i + 1), now() from range(?) t(i)",
            [n_rooms],
        )
        con.execute(
            "insert into criteria select r.room_id, 'c' || k, case when k = 0 then 'trap' else 'identify' end,"
            " null, null, 'text', '{}', k = 0 from rooms r, range(?) t(k)",
            [args.criteria_per],
        )
        writer = TraceWriter(con)
        timed = 0.0
        rows = 0
        for start in range(0, args.trajectories, args.chunk):
            batch = synth(start, min(args.chunk, args.trajectories - start), args.calls_per, n_rooms)
            t0 = time.perf_counter()
            for trace, room in batch:
                writer.add(
                    trace,
                    trajectory_row(trace, room, "base-bench", int(trace.trajectory_id[1:]), "train"),
                    [],
                )
                rows += 1 + len(trace.turns) + len(trace.subcalls)
            writer.flush()
            timed += time.perf_counter() - t0
        print(
            f"ingest: {args.trajectories:,} trajectories, {rows:,} rows (trajectories + turns + subcalls) "
            f"in {timed:.1f} s = {rows / timed:,.0f} rows/s (target >= 1,000,000)"
        )
        # grades and coverage for the views (Arrow, not timed as ingest)
        n = args.trajectories
        tids = pa.array([f"t{i:08d}" for i in range(n)])
        with db.transaction(con):
            for k in range(args.criteria_per):
                db.write_arrow(
                    con,
                    "grades",
                    pa.table(
                        {
                            "trajectory_id": tids,
                            "criterion_id": [f"c{k}"] * n,
                            "judge": ["reference"] * n,
                            "passed": [(i + k) % 3 != 0 for i in range(n)],
                        }
                    ),
                )
            db.write_arrow(
                con,
                "coverage",
                pa.table(
                    {
                        "trajectory_id": tids,
                        "scope": ["all"] * n,
                        "grouping": ["total"] * n,
                        "group_value": [""] * n,
                        "n_probes": [100] * n,
                        "n_seen": [i % 101 for i in range(n)],
                    }
                ),
            )
        con.execute(
            "insert into selections select 'sel-bench', trajectory_id, true, 'accepted', '{}', now() "
            "from trajectories"
        )
        worst = 0.0
        for view in sorted(p.stem for p in (db.SQL_DIR / "views").glob("*.sql")):
            t0 = time.perf_counter()
            con.execute(f"select count(*) from (select * from {view})").fetchall()
            dt = time.perf_counter() - t0
            worst = max(worst, dt)
            print(f"view {view:24s} {dt:6.2f} s")
        print(f"slowest view {worst:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
