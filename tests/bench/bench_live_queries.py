"""Benchmark: sampler ingest and view latency with an analyst querying in a loop, side by side with none.

    python tests/bench/bench_live_queries.py [--trajectories 3000 --calls-per 20 --per-flush 1]

The writer does what the sample stage does: it serves readers
(pipeline.query_server, as every stage command does) and commits finished
trajectories through TraceWriter, one flush per finished trajectory by
default. Run 1 ingests alone; run 2 ingests while another process asks
`select count(*) ...` from the trajectory_scores view (rebuilt from the
trajectories, grades and coverage tables on every call) in a loop through
pipeline.query_client, as `pipeline sql` does. Printed: ingest rate alone
and with the reader, their ratio, and the reader's latency while the
writer ingests, beside its latency on an idle warehouse (the file opened
read-only per query, no server). Target: ingest with a reader >= 0.8x
alone, and no query fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench_warehouse import synth

from pipeline import db
from pipeline.query_client import query
from pipeline.query_server import serve_readers
from pipeline.trace_store import TraceWriter, trace_rows

VIEW_SQL = "select count(*) as n, avg(score) as s from trajectory_scores"

READER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from pipeline.query_client import query
    path, stop = Path(sys.argv[1]), Path(sys.argv[2])
    lat, counts, errors = [], [], 0
    print("ready", flush=True)
    while not stop.exists():
        t0 = time.perf_counter()
        try:
            counts.append(query(path, sys.argv[3]).column("n")[0].as_py())
            lat.append(time.perf_counter() - t0)
        except Exception as exc:
            errors += 1
            print(repr(exc), file=sys.stderr)
    print(json.dumps({"latency_s": lat, "counts": counts, "errors": errors}))
    """
)


def rows_for(n: int, calls_per: int, start: int) -> list:
    return [
        trace_rows(t, room_id=t.room, policy_id=t.policy_id, sample_index=i, purpose="train")
        for i, (t, _) in enumerate(synth(start, n, calls_per), start=start)
    ]


def ingest(path: Path, rows: list, per_flush: int) -> float:
    """Seconds to commit every trajectory, per_flush at a time, as the sampler's writer does."""
    with serve_readers(path, command="bench ingest"):
        con = db.connect(path)
        writer = TraceWriter(con)
        t0 = time.perf_counter()
        for i, r in enumerate(rows, start=1):
            writer.add(r)
            if i % per_flush == 0:
                writer.flush()
        writer.flush()
        elapsed = time.perf_counter() - t0
        writer.close()
        con.close()
    return elapsed


def start_reader(path: Path, stop: Path) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(stop), VIEW_SQL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) >= 2 else (values or [float("nan")])[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=3000)
    ap.add_argument("--calls-per", type=int, default=20)
    ap.add_argument("--per-flush", type=int, default=1, help="trajectories per commit (the sampler: 1)")
    args = ap.parse_args()
    n = args.trajectories
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        alone_db, shared_db = tmp / "alone.duckdb", tmp / "shared.duckdb"
        for p in (alone_db, shared_db):
            db.connect(p).close()
        rows_a = rows_for(n, args.calls_per, 0)
        alone_s = ingest(alone_db, rows_a, args.per_flush)
        del rows_a

        rows_b = rows_for(n, args.calls_per, 0)
        stop = tmp / "stop"
        reader = start_reader(shared_db, stop)
        shared_s = ingest(shared_db, rows_b, args.per_flush)
        stop.touch()
        out, err = reader.communicate(timeout=120)
        busy = json.loads(out)

        idle = []
        for _ in range(30):
            t0 = time.perf_counter()
            query(shared_db, VIEW_SQL)
            idle.append(time.perf_counter() - t0)

    counts = busy["counts"]
    print(f"trajectories: {n} with {args.calls_per} subagent calls each, {args.per_flush} per commit")
    print(f"{'':34s} {'alone':>10s} {'with reader':>12s} {'ratio':>7s}")
    a, b = n / alone_s, n / shared_s
    print(f"{'ingest, trajectories/s':34s} {a:10.0f} {b:12.0f} {b / a:7.2f}")
    print(f"queries answered while ingesting: {len(busy['latency_s'])}, failed: {busy['errors']}")
    print(
        f"counts seen never went down: {counts == sorted(counts)} (last {counts[-1] if counts else None} of {n})"
    )
    print(f"{'view latency (ms)':34s} {'p50':>10s} {'p95':>12s}")
    print(f"{'  idle warehouse, file read-only':34s} {pct(idle, 50) * 1e3:10.1f} {pct(idle, 95) * 1e3:12.1f}")
    lat = busy["latency_s"]
    print(f"{'  while ingesting, via server':34s} {pct(lat, 50) * 1e3:10.1f} {pct(lat, 95) * 1e3:12.1f}")
    if busy["errors"] or counts != sorted(counts):
        print(err[-2000:])
        sys.exit(1)


if __name__ == "__main__":
    main()
