"""Traces in the warehouse: the sampler's bulk writer and the loader that rebuilds them.

A trace is stored normalised, each part once:
- ``trajectories``: one row of scalar fields and behaviour metrics, plus a
  small JSON (``trace``) of what has no table of its own: the room name,
  token usage per model, the harness's own memo timing and depth-2 child
  traces;
- ``turns``: the root's turns (messages, completion, code, output, timing);
- ``subcalls``: every subagent call of the tree, flattened in order.
``load_traces`` joins them back into ``Trace`` values equal to the ones
written (rows from before this layout carry the whole trace in the JSON and
load from it as they are).

The writer is built for throughput, because a nightly sweep can write
millions of subagent calls. The per-trajectory work — the behaviour metrics
and turning objects into column lists (``trace_rows``) — is done once, where
the trajectory finished (a Ray worker, or the sampler as each episode ends).
The writer itself only concatenates column lists, converts each column to
Arrow once per flush and hands DuckDB whole Arrow tables.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from pipeline import db
from pipeline.harness.trace import Subcall, Trace, Turn

# (column, Turn/Subcall attribute, Arrow type), in table order after trajectory_id.
_TURN_COLUMNS = [
    ("turn_index", "index", pa.int32()),
    ("completion", "completion", pa.string()),
    ("code", "code", pa.string()),
    ("output", "output", pa.string()),
    ("error", "error", pa.string()),
    ("prompt_tokens", "prompt_tokens", pa.int32()),
    ("completion_tokens", "completion_tokens", pa.int32()),
    ("started_s", "started_s", pa.float64()),
    ("ended_s", "ended_s", pa.float64()),
]
_CALL_COLUMNS = [
    ("turn_index", "turn_index", pa.int32()),
    ("depth", "depth", pa.int32()),
    ("parent_call", "parent_call", pa.int32()),
    ("model", "model", pa.string()),
    ("prompt", "prompt", pa.string()),
    ("response", "response", pa.string()),
    ("error", "error", pa.string()),
    ("prompt_tokens", "prompt_tokens", pa.int32()),
    ("completion_tokens", "completion_tokens", pa.int32()),
    ("latency_s", "latency_s", pa.float64()),
    ("issued_s", "issued_s", pa.float64()),
    ("returned_s", "returned_s", pa.float64()),
]
_TRAJECTORY_COLUMNS = [
    ("trajectory_id", pa.string()),
    ("room_id", pa.string()),
    ("policy_id", pa.string()),
    ("sample_index", pa.int32()),
    ("purpose", pa.string()),
    ("harness", pa.string()),
    ("status", pa.string()),
    ("end_reason", pa.string()),
    ("memo", pa.string()),
    ("n_turns", pa.int32()),
    ("n_subcalls", pa.int32()),
    ("root_prompt_tokens", pa.int64()),
    ("root_completion_tokens", pa.int64()),
    ("sub_prompt_tokens", pa.int64()),
    ("sub_completion_tokens", pa.int64()),
    ("wall_s", pa.float64()),
    ("delegated_chars", pa.int64()),
    ("memo_chars", pa.int32()),
    ("n_findings", pa.int32()),
    ("n_findings_carried", pa.int32()),
    ("memo_turn", pa.int32()),
    ("memo_started_s", pa.float64()),
    ("last_subcall_turn", pa.int32()),
    ("last_subcall_returned_s", pa.float64()),
    ("started_at", pa.timestamp("us")),
    ("trace", pa.string()),
]
MIN_FINDING_CHARS = 20  # a shorter answer line is an acknowledgement, not a finding
MIN_MEMO_LINE_CHARS = 24  # a shorter memo line is a heading or a bare variable, not prose


def all_subcalls(trace: Trace) -> Iterable[Subcall]:
    """Every subagent call of the trace tree, in the order the `subcalls` table numbers them."""
    yield from trace.subcalls
    for child in trace.children:
        yield from all_subcalls(child)


def trace_extras(trace: Trace) -> str:
    """The JSON kept in `trajectories.trace`: the parts of a trace that have no table."""
    return orjson.dumps(
        {
            "room": trace.room,
            "usage": trace.usage,
            "memo_started_s": trace.memo_started_s,
            "children": [c.to_dict() for c in trace.children],
        }
    ).decode()


def findings(memo: str | None, calls: Sequence[Subcall]) -> tuple[int, int]:
    """(finding lines in successful subagent answers, of which appear verbatim in the memo).

    A finding is an answer line of MIN_FINDING_CHARS or more that is neither an
    error nor a "no diligence issues" line.
    """
    memo = memo or ""
    n = carried = 0
    for call in calls:
        if call.error or not call.response:
            continue
        for line in call.response.splitlines():
            line = line.strip()
            if (
                len(line) < MIN_FINDING_CHARS
                or line.startswith("ERROR")
                or line.lower().startswith("no diligence")
            ):
                continue
            n += 1
            carried += line in memo
    return n, carried


def memo_turn(trace: Trace) -> int | None:
    """The root turn in which the memo was begun.

    That is the first turn whose completion already holds a line of the final
    memo (MIN_MEMO_LINE_CHARS or more); a memo assembled by code from subagent
    answers holds none and counts as begun in the last turn, which submitted it.
    """
    if trace.memo is None or not trace.turns:
        return None
    lines = [ln.strip() for ln in trace.memo.splitlines()]
    lines = [ln for ln in lines if len(ln) >= MIN_MEMO_LINE_CHARS]
    for turn in trace.turns:
        if any(ln in turn.completion for ln in lines):
            return turn.index
    return trace.turns[-1].index


@dataclass
class TraceRows:
    """One finished trajectory as the writer takes it: its `trajectories` row (with
    the behaviour metrics) and its turns and subagent calls as column lists.

    Built once per trajectory where it finished (``trace_rows``); the writer
    then only concatenates lists, so its cost per row is a few list appends.
    """

    trajectory: tuple  # values in _TRAJECTORY_COLUMNS order
    turns: list[list]  # trajectory_id, new_messages, then _TURN_COLUMNS
    calls: list[list]  # trajectory_id, call_index, then _CALL_COLUMNS

    @property
    def status(self) -> str:
        return self.trajectory[6]


def trace_rows(trace: Trace, *, room_id: str, policy_id: str, sample_index: int, purpose: str) -> TraceRows:
    """The rows of one finished trace, with its behaviour metrics."""
    tid = trace.trajectory_id
    turns, calls = trace.turns, list(all_subcalls(trace))
    n_findings, n_carried = findings(trace.memo, calls)
    mt = memo_turn(trace)
    last = max(calls, key=attrgetter("returned_s")) if calls else None
    row = (
        tid,
        room_id,
        policy_id,
        sample_index,
        purpose,
        trace.harness,
        trace.status,
        trace.end_reason,
        trace.memo,
        len(turns),
        len(calls),
        sum(t.prompt_tokens for t in turns),
        sum(t.completion_tokens for t in turns),
        sum(c.prompt_tokens for c in calls),
        sum(c.completion_tokens for c in calls),
        trace.wall_s,
        sum(len(c.prompt) for c in calls),
        len(trace.memo or ""),
        n_findings,
        n_carried,
        mt,
        next((t.started_s for t in turns if t.index == mt), None),
        last.turn_index if last else None,
        last.returned_s if last else None,
        datetime.fromisoformat(trace.started_at) if trace.started_at else db.now(),
        trace_extras(trace),
    )
    turn_cols = [[tid] * len(turns), [orjson.dumps(t.new_messages).decode() for t in turns]]
    turn_cols += [[getattr(t, attr) for t in turns] for _, attr, _ in _TURN_COLUMNS]
    call_cols = [[tid] * len(calls), list(range(len(calls)))]
    call_cols += [[getattr(c, attr) for c in calls] for _, attr, _ in _CALL_COLUMNS]
    return TraceRows(row, turn_cols, call_cols)


_TURN_TABLE = (
    ["trajectory_id", "new_messages", *(c for c, _, _ in _TURN_COLUMNS)],
    [pa.string(), pa.string(), *(t for _, _, t in _TURN_COLUMNS)],
)
_CALL_TABLE = (
    ["trajectory_id", "call_index", *(c for c, _, _ in _CALL_COLUMNS)],
    [pa.string(), pa.int32(), *(t for _, _, t in _CALL_COLUMNS)],
)


@contextlib.contextmanager
def _gc_paused():
    """Building millions of values would trigger full collections that find nothing to free."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _table(columns: Sequence[list], spec: tuple[list[str], list[pa.DataType]]) -> pa.Table:
    names, types = spec
    return pa.Table.from_arrays([pa.array(c, t) for c, t in zip(columns, types, strict=True)], names=names)


class TraceWriter:
    """Buffers whole trajectories and writes them column-wise, one transaction per flush.

    ``add`` appends a trajectory's column lists to the buffer's; ``flush``
    turns each buffered column into one Arrow array and inserts
    trajectories, turns, subagent calls and coverage in one transaction: a
    trajectory is in the warehouse whole or not at all.

    The sampler flushes after every trajectory, so a kill loses only the
    ones in flight. A bulk load calls ``flush(wait=False)``: the transaction
    runs on a background thread (DuckDB releases the GIL) while the caller
    builds the next chunk; the next flush, or ``wait()``, waits for it and
    re-raises its error.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self._reset()

    def _reset(self) -> None:
        self.trajectories: list[tuple] = []
        self.turns: list[list] = [[] for _ in _TURN_TABLE[0]]
        self.calls: list[list] = [[] for _ in _CALL_TABLE[0]]
        self.coverage: list[dict[str, Any]] = []

    def add(self, rows: TraceRows, coverage: Sequence[dict[str, Any]] = ()) -> None:
        self.trajectories.append(rows.trajectory)
        for dst, src in zip(self.turns, rows.turns, strict=True):
            dst.extend(src)
        for dst, src in zip(self.calls, rows.calls, strict=True):
            dst.extend(src)
        self.coverage.extend(coverage)

    def add_trace(
        self,
        trace: Trace,
        *,
        room_id: str,
        policy_id: str,
        sample_index: int,
        purpose: str,
        coverage: Sequence[dict[str, Any]] = (),
    ) -> None:
        rows = trace_rows(
            trace, room_id=room_id, policy_id=policy_id, sample_index=sample_index, purpose=purpose
        )
        self.add(rows, coverage)

    def __len__(self) -> int:
        return len(self.trajectories)

    def _tables(self) -> dict[str, pa.Table]:
        names = [c for c, _ in _TRAJECTORY_COLUMNS]
        traj = pa.Table.from_arrays(
            [
                pa.array(col, t)
                for col, (_, t) in zip(zip(*self.trajectories, strict=True), _TRAJECTORY_COLUMNS, strict=True)
            ],
            names=names,
        )
        return {
            "trajectories": traj,
            "turns": _table(self.turns, _TURN_TABLE),
            "subcalls": _table(self.calls, _CALL_TABLE),
        }

    def _write(self, tables: dict[str, pa.Table], coverage: list[dict[str, Any]]) -> None:
        with db.transaction(self.con):
            for table, data in tables.items():
                db.write_arrow(self.con, table, data)
            db.write_rows(self.con, "coverage", coverage)

    def flush(self, wait: bool = True) -> int:
        """Write everything buffered in one transaction; returns the number of trajectories."""
        self.wait()
        if not self.trajectories:
            return 0
        n = len(self.trajectories)
        with _gc_paused():
            tables = self._tables()
        coverage = self.coverage
        self._reset()
        if wait:
            self._write(tables, coverage)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trace-writer")
            self._pending = self._pool.submit(self._write, tables, coverage)
        return n

    def wait(self) -> None:
        """Wait for a background flush; re-raises its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None


# --------------------------------------------------------------------------- loading


def load_traces(
    con: duckdb.DuckDBPyConnection, trajectory_ids: Sequence[str], *, subcalls: bool = True
) -> dict[str, Trace]:
    """Rebuild the traces of ``trajectory_ids`` from the warehouse (missing ids are left out).

    ``subcalls=False`` skips the subagent calls (their prompts are the bulk
    of a trace) when only the root's conversation is needed.
    """
    if not trajectory_ids:
        return {}
    ids = pa.table({"trajectory_id": pa.array(list(trajectory_ids), pa.string())})
    con.register("wanted_trajectories", ids)
    try:
        heads = con.execute(
            "select trajectory_id, policy_id, harness, status, end_reason, memo, wall_s, started_at, trace "
            "from trajectories join wanted_trajectories using (trajectory_id)"
        ).fetchall()
        turn_rows = con.execute(
            "select trajectory_id, turn_index, new_messages, completion, code, output, error, "
            "prompt_tokens, completion_tokens, started_s, ended_s "
            "from turns join wanted_trajectories using (trajectory_id) order by trajectory_id, turn_index"
        ).fetchall()
        call_rows = []
        if subcalls:
            # Top-level calls only (parent_call is null); depth-2 calls live inside their child trace.
            call_rows = con.execute(
                "select trajectory_id, call_index, turn_index, depth, model, prompt, response, error, "
                "prompt_tokens, completion_tokens, latency_s, issued_s, returned_s, parent_call "
                "from subcalls join wanted_trajectories using (trajectory_id) "
                "where parent_call is null order by trajectory_id, call_index"
            ).fetchall()
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister("wanted_trajectories")
    out: dict[str, Trace] = {}
    legacy: set[str] = set()
    for tid, policy_id, harness, status, end_reason, memo, wall_s, started_at, extras in heads:
        extras = orjson.loads(extras) if isinstance(extras, str) else extras
        if "turns" in extras:  # written before traces were normalised: the JSON is the whole trace
            out[tid] = Trace.from_dict(extras)
            legacy.add(tid)
            continue
        out[tid] = Trace(
            trajectory_id=tid,
            room=extras["room"],
            policy_id=policy_id,
            harness=harness,
            children=[Trace.from_dict(c) for c in extras["children"]],
            memo=memo,
            status=status,
            end_reason=end_reason,
            usage=extras["usage"],
            started_at=started_at.isoformat(),
            wall_s=wall_s,
            memo_started_s=extras["memo_started_s"],
        )
    for tid, index, messages, *rest in turn_rows:
        if tid in out and tid not in legacy:
            out[tid].turns.append(Turn(index, orjson.loads(messages), *rest))
    for tid, index, turn_index, depth, *rest in call_rows:
        if tid in out and tid not in legacy:
            out[tid].subcalls.append(Subcall(index, turn_index, depth, *rest))
    if not subcalls:
        for t in out.values():
            t.subcalls = []
    return out
