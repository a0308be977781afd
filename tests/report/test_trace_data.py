"""Grouping subagent calls into llm_batch rounds, and reading the judge's verdict lines."""

from __future__ import annotations

from pipeline.report.memo_marks import missing_of, unit_of
from pipeline.report.trace_data import group_batches


def _call(i, turn, issued, returned, error=None):
    return {"call_index": i, "turn_index": turn, "issued_s": issued, "returned_s": returned,
            "prompt_tokens": 10, "completion_tokens": 2, "error": error}  # fmt: skip


def test_a_batch_waiting_for_free_slots_stays_one_batch():
    # 4 prompts, 2 in flight: call 2 starts when call 0 returns, call 3 when call 1 returns
    calls = [_call(0, 0, 1.0, 2.0), _call(1, 0, 1.0, 3.0), _call(2, 0, 2.0, 4.0), _call(3, 0, 3.0, 5.0)]
    (batch,) = group_batches(calls)[0]
    assert [c["call_index"] for c in batch.calls] == [0, 1, 2, 3]
    assert batch.seconds == 4.0 and batch.prompt_tokens == 40


def test_batches_split_when_the_previous_one_returned_and_by_turn():
    calls = [
        _call(0, 0, 1.0, 2.0), _call(1, 0, 1.0, 2.5),  # llm_batch of two
        _call(2, 0, 2.6, 3.0, error="TimeoutError"),  # llm_query after it returned
        _call(3, 1, 3.5, 4.0),  # next turn
    ]  # fmt: skip
    by_turn = group_batches(calls)
    assert [len(b.calls) for b in by_turn[0]] == [2, 1] and by_turn[0][1].errors == 1
    assert [len(b.calls) for b in by_turn[1]] == [1]


def test_verdict_lines_name_their_unit_and_what_is_missing():
    assert unit_of("unit 3 has every field") == 3
    assert unit_of("unit 12 flags the decoy") == 12
    reason = "no unit has every field; closest (unit 2) lacks amount 1,250,000, path 'a/b.txt'"
    assert unit_of(reason) == 2 and missing_of(reason) == "amount 1,250,000, path 'a/b.txt'"
    assert unit_of("nothing to read (empty, or only quotation)") is None
