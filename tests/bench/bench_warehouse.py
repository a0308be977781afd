"""Benchmark: warehouse ingest through the sampler's writer, and view latency.

    python tests/bench/bench_warehouse.py [--trajectories 1000000 --calls-per 20]

Builds synthetic traces in chunks (not timed) and turns each into its rows
with trace_rows (timed apart and printed: the sampler pays it once per
trajectory, where the trajectory finished, in parallel workers). Then writes
all of them through the sampler's own writer, pipeline.trace_store.TraceWriter,
flushing in bulk whenever it is full; timed is the wall clock from the first
add to the last commit (buffering, building the Arrow columns, DuckDB inserts
and commits; each flush's transaction runs while the next one is buffered and
built). Beside it, the row-dict path (db.write_rows) on a slice, so the ratio
is measured in the same run.
Then adds reference grades and coverage with Arrow and times every view in
sql/marts, fetching its whole result. Targets: ingest >= 1,000,000 rows/s;
every view under 2 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from pipeline import db
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.trace_store import TraceWriter, trace_rows, trajectory_id

N_ROOMS = 200


def bench_id(i: int) -> str:
    """The id the sampler would give trajectory i (a hash, so the key index sees realistic keys)."""
    return trajectory_id("base-bench", f"room-{i % N_ROOMS:03d}", "train", i)


def synth(start: int, n: int, calls_per: int) -> list[tuple[Trace, str]]:
    out = []
    for i in range(start, start + n):
        room = f"room-{i % N_ROOMS:03d}"
        t = Trace(
            bench_id(i),
            room,
            "base-bench",
            status="submitted",
            memo="Finding: consent required. " * 8,
            started_at="2026-12-01T00:00:00",
            wall_s=12.5,
            submit_turn_started_s=10.0,
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


def _row_dict_rate(calls_per: int, n: int = 2_000) -> float:
    """The same rows as per-row dicts through db.write_rows (the generic writer), for the ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = db.connect(Path(tmp) / "scratch.duckdb")
        writer = TraceWriter(scratch)
        for i, (t, room) in enumerate(synth(0, n, calls_per)):
            writer.add_trace(t, room_id=room, policy_id="base-bench", sample_index=i, purpose="train")
        writer.flush()
        tables = {
            t: db.fetch_dicts(scratch, f"select * from {t}") for t in ("trajectories", "turns", "subcalls")
        }
        scratch.close()
        con = db.connect(Path(tmp) / "dicts.duckdb")
        t0 = time.perf_counter()
        db.write_many(con, tables)
        dt = time.perf_counter() - t0
        con.close()
        return sum(len(v) for v in tables.values()) / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=1_000_000)
    ap.add_argument("--calls-per", type=int, default=20)
    ap.add_argument("--chunk", type=int, default=20_000, help="traces synthesised at a time (not timed)")
    ap.add_argument("--criteria-per", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        con = db.connect(Path(tmp) / "bench.duckdb")
        con.execute(
            "insert into rooms select 'room-' || lpad(i::varchar, 3, '0'), 'room-' || lpad(i::varchar, 3, '0'),"
            " 'generated', 'train', i, '{}', '{}', 20 + i, 10000 * (i + 1), now() from range(?) t(i)",
            [N_ROOMS],
        )
        con.execute(
            "insert into criteria select r.room_id, 'c' || k, case when k = 0 then 'trap' else 'identify' end,"
            " null, null, 'text', '{}', k = 0 from rooms r, range(?) t(k)",
            [args.criteria_per],
        )
        # Every trajectory's rows, as the sampler's workers hand them over (not timed as ingest).
        ready, produced = [], 0.0
        for start in range(0, args.trajectories, args.chunk):
            batch = synth(start, min(args.chunk, args.trajectories - start), args.calls_per)
            t0 = time.perf_counter()
            ready += [
                trace_rows(t, room_id=room, policy_id="base-bench", sample_index=i + start, purpose="train")
                for i, (t, room) in enumerate(batch)
            ]
            produced += time.perf_counter() - t0
        rows = sum(r.n_rows for r in ready)
        # Ingest: wall clock from the first add to the last commit.
        writer = TraceWriter(con)
        t0 = time.perf_counter()
        for r in ready:
            writer.add(r)
            if writer.full:
                writer.flush(wait=False)  # DuckDB writes these row groups while the next ones are built
        writer.flush()  # the remainder
        writer.close()
        timed = time.perf_counter() - t0
        del ready
        n = args.trajectories
        print(
            f"ingest through TraceWriter: {n:,} trajectories, {rows:,} rows (trajectories + turns + subcalls) "
            f"in {timed:.1f} s = {rows / timed:,.0f} rows/s (target >= 1,000,000)"
        )
        print(
            f"  per-trajectory rows and metrics (trace_rows, paid once where each trajectory finishes): "
            f"{produced / n * 1e6:.0f} us/trajectory; both steps in one process: {rows / (timed + produced):,.0f} rows/s"
        )
        dict_rate = _row_dict_rate(args.calls_per)
        print(
            f"  row dicts through db.write_rows, same schema, 2,000 trajectories: {dict_rate:,.0f} rows/s "
            f"-> the writer is {rows / timed / dict_rate:.1f}x faster"
        )
        # grades and coverage for the views (Arrow, not timed as ingest)
        tids = pa.array([bench_id(i) for i in range(n)])
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
                            "kind": ["trap" if k == 0 else "identify"] * n,
                            "is_trap": [k == 0] * n,
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
        n_calls = con.execute("select count(*) from subcalls").fetchall()[0][0]
        print(f"warehouse: {n:,} trajectories, {n_calls:,} subagent calls, {n * args.criteria_per:,} grades")
        worst = 0.0
        for view in sorted(p.stem for p in (db.SQL_DIR / "marts").glob("*.sql")):
            t0 = time.perf_counter()
            result = con.sql(f"select * from {view}").to_arrow_table()  # the whole result, every column
            dt = time.perf_counter() - t0
            worst = max(worst, dt)
            print(f"view {view:24s} {dt:6.2f} s  ({result.num_rows:,} rows)")
        print(f"slowest view {worst:.2f} s (target < 2 s)")


if __name__ == "__main__":
    main()
