"""Traces in the warehouse: the sampler's bulk writer and the loader that rebuilds them.

A trace is stored normalised, each part once:
- ``trajectories``: one row of scalar fields and behaviour metrics, plus a
  small JSON (``trace``) of what has no table of its own: the room name,
  token usage per model, the harness's own memo timing and depth-2 child
  traces;
- ``turns``: the root's turns (messages, completion, code, output, timing);
- ``subcalls``: every subagent call of the tree, flattened in order.
``load_traces`` joins them back into ``Trace`` values equal to the ones
written.

The writer is built for throughput, because a nightly sweep can write
millions of subagent calls. The per-trajectory work — the behaviour metrics
and packing turns and calls into columns (``trace_rows``) — is done once, where
the trajectory finished (a Ray worker, or the sampler as each episode ends).
The writer itself only appends a few packed buffers per trajectory
(``PackedRows``), builds each Arrow column from them once per flush and hands DuckDB whole Arrow
tables.
"""

from __future__ import annotations

import contextlib
import gc
from array import array
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa

from pipeline import db
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.ids import stable_id

I32, I64, F64, STR, TS = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.timestamp("us")
# The trajectories table: one row per trajectory, built by trace_rows.
_TRAJECTORY_COLUMNS = [
    ("trajectory_id", STR),
    ("room_id", STR),
    ("policy_id", STR),
    ("sample_index", I32),
    ("purpose", STR),
    ("harness", STR),
    ("status", STR),
    ("end_reason", STR),
    ("memo", STR),
    ("n_turns", I32),
    ("n_subcalls", I32),
    ("root_prompt_tokens", I64),
    ("root_completion_tokens", I64),
    ("sub_prompt_tokens", I64),
    ("sub_completion_tokens", I64),
    ("wall_s", F64),
    ("delegated_chars", I64),
    ("memo_chars", I32),
    ("n_findings", I32),
    ("n_findings_carried", I32),
    ("memo_turn", I32),
    ("memo_turn_started_s", F64),  # start of memo_turn
    ("last_subcall_turn", I32),
    ("last_subcall_returned_s", F64),
    ("started_at", TS),  # packed as microseconds since the epoch
    ("sandbox_level", STR),
    ("subagent_budget_tokens", I64),
    ("trace", STR),
]
_trajectory_values = itemgetter(*(c for c, _ in _TRAJECTORY_COLUMNS))
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
            "submit_turn_started_s": trace.submit_turn_started_s,
            "sandbox_level": trace.sandbox_level,
            "subagent_budget_tokens": trace.subagent_budget_tokens,
            "children": [c.to_dict() for c in trace.children],
        }
    ).decode()


def findings(memo: str | None, calls: Sequence[Subcall]) -> tuple[int, int]:
    """(finding lines in successful subagent answers, of which reached the memo).

    A finding is an answer line of MIN_FINDING_CHARS or more that is neither an
    error, a "no diligence issues" line nor a "Resolved: ..." line (the
    extractive subagent's note that a document settles an issue). A plain line
    reached the memo when it appears in it verbatim; a structured finding (a
    JSON object line, as the extractive subagent writes) when its ``summary``
    or its ``quote`` does, since a memo written from structured findings
    restates them instead of pasting the line.
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
                or line.lower().startswith(("no diligence", "resolved:"))
            ):
                continue
            n += 1
            carried += _reached(line, memo)
    return n, carried


def _reached(line: str, memo: str) -> bool:
    if line.startswith("{"):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            texts = [obj.get(k) for k in ("summary", "quote")]
            return any(isinstance(t, str) and t.strip() and t.strip() in memo for t in texts)
    return line in memo


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


# Numeric Arrow types and how they are packed: array.array typecode, numpy dtype.
_NUMERIC = {I32: ("i", np.int32), I64: ("q", np.int64), TS: ("q", np.int64), F64: ("d", np.float64)}
_EPOCH, _MICROSECOND = datetime(1970, 1, 1), timedelta(microseconds=1)


class _Layout:
    """The columns of a table as packed: the trajectory's own row, or a child table.

    ``computed`` columns come first and are filled by ``trace_rows``; each
    ``copied`` column holds the Turn / Subcall attribute of the same name.
    A child table (``keyed``: turns, subcalls) does not pack trajectory_id:
    the writer derives it from the trajectory's position in the flush (one
    ``take`` in Arrow).
    """

    def __init__(
        self,
        computed: Sequence[tuple[str, pa.DataType]],
        copied: Sequence[tuple[str, pa.DataType]] = (),
        keyed: bool = True,
    ):
        columns = [*computed, *copied]
        self.keyed = keyed
        self.names = [*(["trajectory_id"] if keyed else []), *(c for c, _ in columns)]
        self.types = [t for _, t in columns]
        self.values = attrgetter(*(c for c, _ in copied)) if copied else None
        self.strings = [i for i, t in enumerate(self.types) if t == STR]
        # numeric columns grouped by how they are packed: (typecode, dtype, [(column index, type)])
        groups: dict[str, tuple[str, type, list[tuple[int, pa.DataType]]]] = {}
        for i, t in enumerate(self.types):
            if t == STR:
                continue
            if t not in _NUMERIC:
                raise TypeError(f"unsupported column type {t} in {columns}")
            code, dtype = _NUMERIC[t]
            groups.setdefault(code, (code, dtype, []))[2].append((i, t))
        self.numeric = list(groups.values())


_TRAJECTORY = _Layout(computed=_TRAJECTORY_COLUMNS, keyed=False)
_TURNS = _Layout(
    # token_ids / token_logprobs: JSON arrays of what the server sampled (RL rollouts), else NULL.
    computed=[("turn_index", I32), ("new_messages", STR), ("token_ids", STR), ("token_logprobs", STR)],
    copied=[
        ("completion", STR),
        ("code", STR),
        ("output", STR),
        ("error", STR),
        ("prompt_tokens", I32),
        ("completion_tokens", I32),
        ("started_s", F64),
        ("ended_s", F64),
        ("reasoning", STR),
    ],
)
_CALLS = _Layout(
    computed=[("call_index", I32)],
    copied=[
        ("turn_index", I32),
        ("depth", I32),
        ("parent_call", I32),
        ("model", STR),
        ("prompt", STR),
        ("response", STR),
        ("error", STR),
        ("prompt_tokens", I32),
        ("completion_tokens", I32),
        ("latency_s", F64),
        ("issued_s", F64),
        ("returned_s", F64),
    ],
)


class PackedRows:
    """One trajectory's rows of one table, in Arrow-ready buffers.

    ``parts`` is one flat tuple: the row count, a validity byte per value
    (row-major), the numbers in one row-major ``array.array`` per storage
    type, the byte lengths of every string (row-major, int32) and one UTF-8
    blob per string column. The writer transposes the parts of a whole
    flush in one ``zip`` and joins each position once, so its cost does not
    grow with the number of columns times trajectories, and no Python step
    runs per value on the writer's side. (Arrow record batches per
    trajectory were measured instead: about 200 us each to build, and DuckDB
    scans thousands of tiny chunks slowly.)
    """

    __slots__ = ("parts",)

    def __init__(self, rows: Sequence[Sequence[Any]], layout: _Layout):
        encoded = [[(r[j] or "").encode() for j in layout.strings] for r in rows]
        self.parts = (
            len(rows),
            array("B", [v is not None for r in rows for v in r]),
            *(array(code, [r[j] or 0 for r in rows for j, _ in cols]) for code, _, cols in layout.numeric),
            array("i", [len(b) for row in encoded for b in row]),
            *(b"".join([row[pos] for row in encoded]) for pos in range(len(layout.strings))),
        )

    @property
    def n(self) -> int:
        return self.parts[0]


def _table(packed: Sequence[PackedRows], layout: _Layout, trajectory_ids: pa.Array | None = None) -> pa.Table:
    """One Arrow table from the packed rows of every trajectory in a flush (in flush order, at least one).

    A keyed (child) table gets its trajectory_id column from ``trajectory_ids``.
    """
    k, n_num, n_str = len(layout.types), len(layout.numeric), len(layout.strings)
    counts, valid, *rest = zip(*[p.parts for p in packed], strict=True)
    counts = np.array(counts, np.int64)
    n = int(counts.sum())
    valid = _join(valid, np.uint8).reshape(n, k).astype(bool)
    cols: list[pa.Array | None] = [None] * k
    for (_, dtype, members), parts in zip(layout.numeric, rest[:n_num], strict=True):
        values = _join(parts, dtype).reshape(n, len(members))
        for pos, (j, typ) in enumerate(members):
            data = pa.py_buffer(np.ascontiguousarray(values[:, pos]))
            cols[j] = pa.Array.from_buffers(typ, n, [_bitmap(valid[:, j]), data])
    lengths = _join(rest[n_num], np.int32).reshape(n, n_str)
    for pos, (j, blobs) in enumerate(zip(layout.strings, rest[n_num + 1 :], strict=True)):
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths[:, pos], out=offsets[1:])
        cols[j] = pa.Array.from_buffers(
            pa.large_string(), n, [_bitmap(valid[:, j]), pa.py_buffer(offsets), pa.py_buffer(b"".join(blobs))]
        )
    if layout.keyed:
        cols.insert(0, trajectory_ids.take(pa.array(np.repeat(np.arange(len(packed)), counts))))
    return pa.Table.from_arrays(cols, names=layout.names)


def _join(parts: Sequence[array | bytes], dtype: type) -> np.ndarray:
    """Concatenate buffers into one numpy array (one copy, in C)."""
    return np.frombuffer(b"".join(parts), dtype)


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


@dataclass
class TraceRows:
    """One finished trajectory as the writer takes it: its `trajectories` row (with
    the behaviour metrics) and its turns and subagent calls as packed columns.

    Built once per trajectory where it finished (``trace_rows``); picklable,
    so a Ray worker returns it as it is.
    """

    status: str
    trajectory: PackedRows  # one row
    turns: PackedRows
    calls: PackedRows

    @property
    def n_rows(self) -> int:
        """Rows this trajectory adds: its trajectory row, turns and subagent calls."""
        return 1 + self.turns.n + self.calls.n


def trajectory_id(policy_id: str, room_id: str, purpose: str, sample_index: int) -> str:
    """The id of a trajectory: derived from its sample key, so the primary key also keeps keys unique."""
    return stable_id(policy_id, room_id, purpose, sample_index, prefix="t-", length=16)


def trace_rows(trace: Trace, *, room_id: str, policy_id: str, sample_index: int, purpose: str) -> TraceRows:
    """The rows of one finished trace, with its behaviour metrics.

    Raises ValueError when the trace's id is not the one its sample key derives
    (``trajectory_id``): the warehouse relies on that to store each key once.
    """
    tid = trace.trajectory_id
    expected = trajectory_id(policy_id, room_id, purpose, sample_index)
    if tid != expected:
        raise ValueError(
            f"trajectory {tid!r}: id must be trajectory_id(policy_id={policy_id!r}, room_id={room_id!r}, "
            f"purpose={purpose!r}, sample_index={sample_index}) = {expected!r}"
        )
    turns, calls = trace.turns, list(all_subcalls(trace))
    n_findings, n_carried = findings(trace.memo, calls)
    mt = memo_turn(trace)
    last = max(calls, key=attrgetter("returned_s")) if calls else None
    row = {
        "trajectory_id": tid,
        "room_id": room_id,
        "policy_id": policy_id,
        "sample_index": sample_index,
        "purpose": purpose,
        "harness": trace.harness,
        "status": trace.status,
        "end_reason": trace.end_reason,
        "memo": trace.memo,
        "n_turns": len(turns),
        "n_subcalls": len(calls),
        "root_prompt_tokens": sum(t.prompt_tokens for t in turns),
        "root_completion_tokens": sum(t.completion_tokens for t in turns),
        "sub_prompt_tokens": sum(c.prompt_tokens for c in calls),
        "sub_completion_tokens": sum(c.completion_tokens for c in calls),
        "wall_s": trace.wall_s,
        "delegated_chars": sum(len(c.prompt) for c in calls),
        "memo_chars": len(trace.memo or ""),
        "n_findings": n_findings,
        "n_findings_carried": n_carried,
        "memo_turn": mt,
        "memo_turn_started_s": next((t.started_s for t in turns if t.index == mt), None),
        "sandbox_level": trace.sandbox_level,
        "subagent_budget_tokens": trace.subagent_budget_tokens,
        "last_subcall_turn": last.turn_index if last else None,
        "last_subcall_returned_s": last.returned_s if last else None,
        "started_at": _micros(datetime.fromisoformat(trace.started_at) if trace.started_at else db.now()),
        "trace": trace_extras(trace),
    }
    turn_rows = [
        (
            t.index,
            orjson.dumps(t.new_messages).decode(),
            _json(t.token_ids),
            _json(t.token_logprobs),
            *_TURNS.values(t),
        )
        for t in turns
    ]
    call_rows = [(i, *_CALLS.values(c)) for i, c in enumerate(calls)]
    return TraceRows(
        trace.status,
        PackedRows([_trajectory_values(row)], _TRAJECTORY),
        PackedRows(turn_rows, _TURNS),
        PackedRows(call_rows, _CALLS),
    )


def _json(value: list[Any] | None) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _micros(t: datetime) -> int:
    """A timestamp as microseconds since the epoch (UTC if it carries a zone)."""
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return (t - _EPOCH) // _MICROSECOND


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


class TraceWriter:
    """Buffers whole trajectories and writes them column-wise, one transaction per flush.

    ``add`` keeps a trajectory's packed rows; ``flush``
    turns each buffered column into one Arrow array and inserts
    trajectories, turns, subagent calls and coverage in one transaction: a
    trajectory is in the warehouse whole or not at all.

    The sampler flushes whatever has finished (one trajectory, or every Ray
    result that is ready), so a kill loses only the ones in flight. A bulk
    load flushes whenever ``full`` and calls ``flush(wait=False)``: the
    transaction runs on a background thread (DuckDB releases the GIL) while
    the caller builds the next chunk; the next flush, or ``wait()``, waits
    for it and re-raises its error.

    ``full`` means a DuckDB row group (BULK_ROWS) of trajectories is
    buffered. A flush at least that large appends whole row groups to every
    table, which DuckDB writes straight into the database file; smaller ones
    go through the write-ahead log and are written again at the next
    checkpoint. Measured on 2 cores (DuckDB alone, 240k trajectories with 20
    calls each): 0.68M rows/s flushing every 20k trajectories, 1.09M every
    60k, 1.40M every 120k.
    """

    BULK_ROWS = 122_880  # DuckDB's row group size

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None
        self._reset()

    def _reset(self) -> None:
        self.trajectories: list[PackedRows] = []
        self.turns: list[PackedRows] = []
        self.calls: list[PackedRows] = []
        self.coverage: list[dict[str, Any]] = []

    def add(self, rows: TraceRows, coverage: Sequence[dict[str, Any]] = ()) -> None:
        self.trajectories.append(rows.trajectory)
        self.turns.append(rows.turns)
        self.calls.append(rows.calls)
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

    @property
    def full(self) -> bool:
        """A bulk flush is due: a row group of trajectories is buffered."""
        return len(self.trajectories) >= self.BULK_ROWS

    def _tables(self) -> dict[str, pa.Table]:
        traj = _table(self.trajectories, _TRAJECTORY)
        ids = traj.column("trajectory_id")
        return {
            "trajectories": traj,
            "turns": _table(self.turns, _TURNS, ids),
            "subcalls": _table(self.calls, _CALLS, ids),
        }

    def _write(self, tables: dict[str, pa.Table], coverage: list[dict[str, Any]]) -> None:
        with db.transaction(self.con):
            for table, data in tables.items():
                db.write_arrow(self.con, table, data)
            db.write_rows(self.con, "coverage", coverage)

    def flush(self, wait: bool = True) -> int:
        """Write everything buffered in one transaction; returns the number of trajectories."""
        if not self.trajectories:
            self.wait()
            return 0
        n = len(self.trajectories)
        with _gc_paused():
            tables = self._tables()  # built while the previous background transaction still runs
        self.wait()  # that transaction's error surfaces here, and this buffer stays in place
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
            "prompt_tokens, completion_tokens, started_s, ended_s, reasoning, token_ids, token_logprobs "
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
    for tid, policy_id, harness, status, end_reason, memo, wall_s, started_at, extras in heads:
        extras = orjson.loads(extras)
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
            # (the key was memo_started_s before migration 007)
            submit_turn_started_s=extras.get("submit_turn_started_s", extras.get("memo_started_s")),
            sandbox_level=extras.get("sandbox_level"),
            subagent_budget_tokens=extras.get("subagent_budget_tokens"),
        )
    for tid, index, messages, *rest, token_ids, token_logprobs in turn_rows:
        out[tid].turns.append(
            Turn(
                index,
                orjson.loads(messages),
                *rest,
                token_ids=token_ids and orjson.loads(token_ids),
                token_logprobs=token_logprobs and orjson.loads(token_logprobs),
            )
        )
    for tid, index, turn_index, depth, *rest in call_rows:
        out[tid].subcalls.append(Subcall(index, turn_index, depth, *rest))
    return out
