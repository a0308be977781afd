"""Trace storage on a real DuckDB file: lossless round trip, SQL-derived metrics, all-or-nothing flushes."""

import duckdb
import orjson
import pyarrow as pa
import pytest

from pipeline import db
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.trace_store import TraceWriter, all_subcalls, findings, load_traces, trajectory_id

# The fixtures' sample keys: (room-a, p1, train, index); ids derive from them.
IL, OC = trajectory_id("p1", "room-a", "train", 0), trajectory_id("p1", "room-a", "train", 1)
INDEX = {IL: 0, OC: 1}

MEMO_LINE = "Consent of Acme Corp is required on a change of control of the Target."


def _call(i, turn, prompt, response, *, error=None, returned=None, depth=1, parent=None):
    return Subcall(
        i,
        turn,
        depth,
        "extractive",
        prompt,
        response,
        error,
        prompt_tokens=10 + i,
        completion_tokens=3 + i,
        latency_s=0.5,
        issued_s=1.0 + i,
        returned_s=returned if returned is not None else 1.5 + i,
        parent_call=parent,
    )


def _turn(i, completion, started):
    return Turn(
        i,
        [{"role": "user", "content": f"output of turn {i - 1}"}],
        completion,
        code=f"x = {i}",
        output=f"shown {i}",
        error=None,
        prompt_tokens=100 * (i + 1),
        completion_tokens=20 * (i + 1),
        started_s=started,
        ended_s=started + 1.0,
        reasoning=f"thinking before turn {i}" if i % 2 else None,  # a reasoning model's, on some turns
    )


def interleaved_trace() -> Trace:
    """The root writes memo prose in turn 0, then delegates more reading in turn 1."""
    t = Trace(
        IL,
        "room-a",
        "p1",
        status="submitted",
        end_reason="submit()",
        memo=f"# Memo\n{MEMO_LINE}\n[x.txt] Assignment needs landlord consent.",
        started_at="2026-12-01T10:00:00.123456",
        wall_s=9.5,
        submit_turn_started_s=5.0,
        sandbox_level="bwrap+seccomp",
        subagent_budget_tokens=1_200,
        usage={"smol": {"prompt_tokens": 300, "completion_tokens": 60, "calls": 2}},
    )
    t.turns = [
        _turn(0, f'```python\nmemo = "{MEMO_LINE}"\nr = llm_batch(p)\n```', 0.0),
        _turn(1, "```python\nr2 = llm_batch(q)\nsubmit(memo + r2)\n```", 5.0),
    ]
    t.subcalls = [
        # findings: line 1 is carried into the memo, line 2 is not, the third line is too short
        _call(
            0,
            0,
            "abcd",
            "[x.txt] Assignment needs landlord consent.\n[y.txt] Exclusivity clause binds the Target.\nok",
        ),
        _call(1, 0, "éfgh✓𝄞", "No diligence issues found in this document at all — ✓."),
        _call(2, 1, "klm", None, error="HTTP 500", returned=8.0),
        _call(3, 1, "nopq", "ERROR: subagent call failed because of a timeout", returned=7.0),
    ]
    child = Trace(f"{IL}/rlm9", "room-a#rlm9", "p1", status="submitted", memo="child memo")
    child.turns = [_turn(0, "child completion", 2.0)]
    child.subcalls = [
        _call(0, 0, "child prompt", "[z.txt] Child finding line long enough.", depth=2, parent=4)
    ]
    t.children = [child]
    return t


def one_cell_trace() -> Trace:
    """One program: llm_batch then submit() in the same cell; the memo is assembled from answers."""
    t = Trace(
        OC,
        "room-a",
        "p1",
        status="submitted",
        memo="[a.txt] Change of control consent needed from lender.",
        started_at="2026-12-01T10:00:00",
        wall_s=3.0,
        submit_turn_started_s=0.0,
    )
    t.turns = [_turn(0, "```python\nr = llm_batch(p)\nsubmit('\\n'.join(r))\n```", 0.0)]
    t.subcalls = [_call(0, 0, "p" * 7, "[a.txt] Change of control consent needed from lender.")]
    return t


def test_structured_findings_reach_the_memo_by_their_summary_or_quote():
    restated = orjson.dumps(
        {"kind": "mfn", "path": "a.txt", "quote": "no less favorable", "summary": "Acme has MFN pricing."}
    ).decode()
    quoted = orjson.dumps(
        {"kind": "mfn", "quote": "prices shall be no less favorable", "summary": ""}
    ).decode()
    dropped = orjson.dumps({"kind": "mfn", "quote": "never written", "summary": "Nor this."}).decode()
    memo = 'MFN (a.txt): Acme has MFN pricing. Quote: "prices shall be no less favorable".'
    resolved = "Resolved: mfn / Acme (b.txt): MFN pricing resolved: the clause was deleted."
    calls = [_call(0, 0, "p", "\n".join([restated, quoted, dropped, "{not json but long enough", resolved]))]
    # four findings (a Resolved line is none); two reached the memo, a broken line is a plain line
    assert findings(memo, calls) == (4, 2)
    assert findings(memo + " {not json but long enough", calls) == (4, 3)


@pytest.fixture
def con(tmp_path):
    c = db.connect(tmp_path / "w.duckdb")
    yield c
    c.close()


def _add(w, trace):
    w.add_trace(
        trace, room_id="room-a", policy_id="p1", sample_index=INDEX[trace.trajectory_id], purpose="train"
    )


def _write(con, *traces):
    w = TraceWriter(con)
    for t in traces:
        _add(w, t)
    return w.flush()


def test_round_trip_is_lossless(con):
    originals = [interleaved_trace(), one_cell_trace()]
    assert _write(con, *originals) == 2
    loaded = load_traces(con, [t.trajectory_id for t in originals] + ["t-missing"])
    assert set(loaded) == {IL, OC}
    for t in originals:
        assert loaded[t.trajectory_id] == t
    levels = con.execute("select sandbox_level from trajectories where trajectory_id = ?", [IL]).fetchall()
    assert levels == [("bwrap+seccomp",)]
    budgets = con.execute(
        "select trajectory_id, subagent_budget_tokens, budget_used from trajectories "
        "join stg_trajectories using (trajectory_id)"
    ).fetchall()
    spent = sum(c.prompt_tokens + c.completion_tokens for c in all_subcalls(originals[0]))  # children too
    assert sorted(budgets, key=lambda r: r[0] != IL) == [
        (IL, 1_200, pytest.approx(spent / 1_200)),
        (OC, None, None),
    ]
    root_only = load_traces(con, [IL], subcalls=False)[IL]
    assert root_only.subcalls == [] and root_only.turns == originals[0].turns


def test_metrics_are_computed_from_the_staged_rows(con):
    _write(con, interleaved_trace(), one_cell_trace())
    row = db.fetch_dicts(con, "select * from trajectories where trajectory_id = ?", [IL])[0]
    # the child's call counts too: 5 calls, prompts 4+6+3+4+12 characters
    assert row["n_subcalls"] == 5
    assert row["delegated_chars"] == 4 + 6 + 3 + 4 + len("child prompt")
    assert row["sub_prompt_tokens"] == 10 + 11 + 12 + 13 + 10
    assert row["n_turns"] == 2
    assert row["root_prompt_tokens"] == 100 + 200 and row["root_completion_tokens"] == 20 + 40
    # findings: two lines of call 0 and the child's line; "ok" is short, "No diligence" and errors are not findings
    assert row["n_findings"] == 3
    assert row["n_findings_carried"] == 1
    assert row["memo_chars"] == len(interleaved_trace().memo)
    # memo prose already in turn 0; the call that returned last (8.0 s) was issued in turn 1
    assert row["memo_turn"] == 0 and row["memo_turn_started_s"] == 0.0
    assert row["last_subcall_turn"] == 1 and row["last_subcall_returned_s"] == 8.0
    one = db.fetch_dicts(con, "select * from trajectories where trajectory_id = ?", [OC])[0]
    assert one["memo_turn"] == 0 and one["last_subcall_turn"] == 0
    assert one["n_findings"] == 1 and one["n_findings_carried"] == 1
    flags = dict(
        con.execute("select trajectory_id, memo_before_delegation_done from trajectory_scores").fetchall()
    )
    assert flags == {IL: True, OC: False}


def test_error_trace_without_turns_or_memo(con):
    t = Trace(IL, "room-a", "p1", status="error", end_reason="RuntimeError: boom", started_at="")
    _write(con, t)
    row = db.fetch_dicts(con, "select * from trajectories")[0]
    assert (row["n_turns"], row["n_subcalls"], row["memo_chars"], row["memo_turn"]) == (0, 0, 0, None)
    back = load_traces(con, [IL])[IL]
    assert back.status == "error" and back.turns == [] and back.started_at  # filled with the write time


def test_failed_flush_writes_nothing(con):
    _write(con, one_cell_trace())
    before = {
        t: con.execute(f"select count(*) from {t}").fetchall()[0][0]
        for t in ("trajectories", "turns", "subcalls")
    }
    w = TraceWriter(con)
    _add(w, interleaved_trace())
    # same trajectory id again: the primary key refuses the whole flush
    _add(w, one_cell_trace())
    with pytest.raises(duckdb.ConstraintException):
        w.flush()
    after = {t: con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in before}
    assert after == before


def test_packed_layouts_match_the_warehouse_tables(con):
    """The writer packs columns in the migrations' order and types: one declaration, checked here."""
    from pipeline import trace_store

    layouts = {
        "trajectories": trace_store._TRAJECTORY,
        "turns": trace_store._TURNS,
        "subcalls": trace_store._CALLS,
    }
    for table, layout in layouts.items():
        declared = dict(db._columns(con, table))
        assert set(layout.names) <= set(declared), table
        arrow = pa.schema([(n, t) for n, t in zip(layout.names[layout.keyed :], layout.types, strict=True)])
        probe = con.sql(f"select {', '.join(arrow.names)} from {table} limit 0").to_arrow_table().schema
        for field in arrow:
            got = probe.field(field.name).type
            assert got == field.type or (pa.types.is_timestamp(got) and pa.types.is_timestamp(field.type)), (
                table,
                field.name,
                got,
                field.type,
            )


def test_background_flush_writes_and_reraises(con):
    """flush(wait=False) commits on the writer's thread; its failure surfaces at the next wait."""
    w = TraceWriter(con)
    _add(w, one_cell_trace())
    assert w.flush(wait=False) == 1
    _add(w, interleaved_trace())
    w.flush(wait=False)  # waits for the first flush before starting its own
    w.wait()
    assert con.execute("select count(*) from trajectories").fetchall()[0][0] == 2
    _add(w, one_cell_trace())
    w.flush(wait=False)  # a duplicate id: fails on the writer's thread
    with pytest.raises(duckdb.ConstraintException):
        w.close()
    assert con.execute("select count(*) from subcalls").fetchall()[0][0] == 1 + 5


def test_failed_background_flush_keeps_the_next_buffer(con):
    """The next flush reports the failed transaction and keeps its own trajectories buffered."""
    w = TraceWriter(con)
    _add(w, one_cell_trace())
    w.flush()
    _add(w, one_cell_trace())
    w.flush(wait=False)  # a duplicate id: fails on the writer's thread
    _add(w, interleaved_trace())
    with pytest.raises(duckdb.ConstraintException):
        w.flush()
    assert len(w) == 1
    assert w.flush() == 1
    assert {r[0] for r in con.execute("select trajectory_id from trajectories").fetchall()} == {IL, OC}


def test_full_at_a_row_group(con, monkeypatch):
    """``full`` turns true once BULK_ROWS trajectories are buffered, and false after the flush."""
    monkeypatch.setattr(TraceWriter, "BULK_ROWS", 2)
    w = TraceWriter(con)
    _add(w, one_cell_trace())
    assert not w.full
    _add(w, interleaved_trace())
    assert w.full
    w.flush()
    assert not w.full and len(w) == 0


def test_an_id_not_derived_from_its_key_is_refused(con):
    """Ids derive from (room, policy, purpose, index), so the primary key alone keeps each key once."""
    w = TraceWriter(con)
    with pytest.raises(ValueError, match=f"trajectory '{OC}'.*sample_index=0"):
        w.add_trace(one_cell_trace(), room_id="room-a", policy_id="p1", sample_index=0, purpose="train")
    assert len(w) == 0
    _add(w, one_cell_trace())
    w.flush()
    again = one_cell_trace()  # the same key sampled twice: same id, refused by the primary key
    _add(w, again)
    with pytest.raises(duckdb.ConstraintException):
        w.flush()
    assert con.execute("select count(*) from trajectories").fetchall()[0][0] == 1


def test_reasoning_reaches_the_training_conversation():
    t = one_cell_trace()
    t.turns[0].reasoning = "check the change-of-control clause first"
    reply = [m for m in t.messages() if m["role"] == "assistant"][0]
    assert reply["reasoning_content"] == "check the change-of-control clause first"
    t.turns[0].reasoning = None
    assert "reasoning_content" not in [m for m in t.messages() if m["role"] == "assistant"][0]
