"""The RLM root loop, with a scripted root, the extractive subagent and the real sandbox."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.harness import kernel_layer
from pipeline.harness.codeblocks import close_open_block, code_blocks, fenced_blocks
from pipeline.harness.prompts import load_variant
from pipeline.harness.room_export import export_room
from pipeline.harness.root import ERROR_CHARS, run_episode
from pipeline.harness.subagents import room_budgets
from pipeline.harness.trace import STATUSES, Trace
from pipeline.llm.base import ContextLimitError, make_backend
from pipeline.rooms.synthetic.generator import generate_room
from tests.doubles import ScriptedBackend


def py(code: str, prose: str = "") -> str:
    return f"{prose}\n```python\n{code}\n```\n" if prose else f"```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def room():
    return generate_room("root-test", seed=11, n_documents=8, tokens_per_document=300)


@pytest.fixture(scope="module")
def room_dir(room, tmp_path_factory):
    return export_room(room, tmp_path_factory.mktemp("rooms") / room.name)


@pytest.fixture
def extractive():
    return make_backend(BackendConfig(kind="extractive"))


def episode(room, room_dir, root, sub, harness=None, sampling=None, **kw):
    harness = harness or HarnessConfig(prompt="base")
    sampling = sampling or SamplingConfig()
    return asyncio.run(
        run_episode(room, room_dir, root, sub, harness, sampling, trajectory_id="t-1", policy_id="p-1", **kw)
    )


def ladder_program(rung: str) -> str:
    """A rung of the program-check ladder as the root's turn (pipeline/grading/ladder.yaml)."""
    from pipeline.grading.program_check import load_ladder

    return py(next(r.program for r in load_ladder() if r.name == rung))


def read_everything_program() -> str:
    """The ladder's `everything` rung: one llm_batch over every chunk of the room."""
    return ladder_program("everything")


# --------------------------------------------------------------------------- code blocks


def test_code_blocks_in_order_and_languages():
    text = "a\n```python\nx = 1\n```\nb\n```repl\nprint(x)\n```\n```json\n{}\n```\n```\ny = 2\n```"
    assert code_blocks(text) == ["x = 1", "print(x)", "y = 2"]
    assert [b.language for b in fenced_blocks(text)] == ["python", "repl", "json", ""]


def test_code_block_without_closing_fence_counts():
    text = "Plan.\n```python\nprint(1)\nprint(2)"
    assert code_blocks(text) == ["print(1)\nprint(2)"]
    assert close_open_block(text).endswith("print(2)\n```")
    assert close_open_block("```python\nx=1\n```") == "```python\nx=1\n```"


def test_fence_glued_to_code_line_closes_the_block():
    assert code_blocks("```python\nprint(1)```\ntext\n```python\nprint(2)\n```") == ["print(1)", "print(2)"]


# --------------------------------------------------------------------------- endings


def test_submit_path(room, room_dir, extractive):
    root = ScriptedBackend([ladder_program("best")], name="root-model")
    # the ladder's top program is ~700 tokens: a turn long enough to hold it
    trace = episode(room, room_dir, root, extractive, sampling=SamplingConfig(max_new_tokens=2048))
    assert trace.status == "submitted", trace.end_reason
    assert len(trace.turns) == 1
    assert trace.sandbox_level == kernel_layer.strongest_level()  # the strongest this machine allows
    h = HarnessConfig()  # the episode's budget is the one room_budgets derives for the room, recorded
    budget = room_budgets(
        room.n_tokens, len(room.documents), h.max_subcalls, h.max_subcall_tokens, h.budget_share
    )
    assert trace.subagent_budget_tokens == budget[1] > 0
    assert trace.submit_turn_started_s == trace.turns[0].started_s
    # Every document went to a subagent and the memo cites documents by path.
    prompted = {
        line[4:-4] for c in trace.subcalls for line in c.prompt.splitlines() if line.startswith("=== ")
    }
    assert prompted == {d.path for d in room.documents}
    assert any(d.path in trace.memo for d in room.documents)
    # One short line per finding, written by the root from the subagents' facts, each with its next step.
    lines = [ln for ln in trace.memo.splitlines() if ln.startswith("- ")]
    assert lines and all("Next step: " in ln and len(ln.split()) <= 90 for ln in lines)
    assert trace.usage["root-model"]["calls"] == 1
    assert trace.usage["extractive"]["calls"] == len(trace.subcalls)
    # The request carried no extra keys, the trace keeps the example marks.
    sent = root.calls[0][0]
    assert all(set(m) == {"role", "content"} for m in sent)
    assert trace.turns[0].new_messages[0]["role"] == "system"


def test_turn_limit_asks_once_for_the_memo(room, room_dir, extractive):
    root = ScriptedBackend([py("print(len(room.documents))"), py("x = 1"), "FINAL MEMO: nothing found."])
    trace = episode(room, room_dir, root, extractive, HarnessConfig(prompt="base", max_turns=2))
    assert trace.status == "turn_limit"
    assert trace.memo == "FINAL MEMO: nothing found."
    assert len(root.calls) == 3 and len(trace.turns) == 3
    final = load_variant("base").section("final", {})
    assert root.calls[2][0][-1]["content"] == final
    assert [m["content"] for m in trace.turns[2].new_messages] == [
        "[no output: only what you print() is shown]",
        final,
    ]
    assert trace.turns[0].output == str(len(room.documents))


def test_final_turn_code_that_submits_is_run(room, room_dir, extractive):
    root = ScriptedBackend([py("x = 1"), py("submit('memo after the limit')")])
    trace = episode(room, room_dir, root, extractive, HarnessConfig(prompt="base", max_turns=1))
    assert trace.status == "submitted"
    assert trace.memo == "memo after the limit"
    assert trace.submit_turn_started_s == trace.turns[1].started_s


def test_completion_without_code_gets_a_correction(room, room_dir, extractive):
    root = ScriptedBackend(["I will now think about the room.", py("submit('done')")])
    trace = episode(room, room_dir, root, extractive)
    assert trace.status == "submitted" and trace.memo == "done"
    no_code = load_variant("base").section("no_code", {})
    assert root.calls[1][0][-1] == {"role": "user", "content": no_code}
    assert trace.turns[0].code is None
    assert trace.turns[1].new_messages == [{"role": "user", "content": no_code}]


def test_errors_come_back_as_short_tracebacks(room, room_dir, extractive):
    root = ScriptedBackend(
        [py("def f(n):\n    return f(n + 1)\nf(0)"), py("print(1 / 0)"), py("submit('x')")]
    )
    trace = episode(room, room_dir, root, extractive)
    first = root.calls[1][0][-1]["content"]
    assert "RecursionError" in first and len(first) <= ERROR_CHARS + 100
    second = root.calls[2][0][-1]["content"]
    assert "ZeroDivisionError" in second and "Traceback" in second
    assert trace.turns[1].error and "ZeroDivisionError" in trace.turns[1].error
    assert trace.status == "submitted"


def test_output_cut_marker_reaches_the_root(room, room_dir, extractive):
    root = ScriptedBackend([py("print('x' * 1000)"), py("submit('x')")])
    trace = episode(room, room_dir, root, extractive, HarnessConfig(prompt="base", output_chars=200))
    shown = root.calls[1][0][-1]["content"]
    assert shown.startswith("x" * 200) and "[... 801 more characters]" in shown
    assert trace.turns[0].output == shown


def test_subagent_budget_ends_the_episode(room, room_dir, extractive):
    root = ScriptedBackend([read_everything_program()])
    trace = episode(room, room_dir, root, extractive, HarnessConfig(prompt="base", max_subcalls=3))
    assert trace.status == "budget"
    assert "max_subcalls" in trace.end_reason
    assert len([c for c in trace.subcalls if c.response is not None]) == 3
    assert trace.memo is not None  # submitted in the same cell: kept, but the status says why it is thin


def test_episode_wall_time_limit(room, room_dir, extractive):
    root = ScriptedBackend([py("while True:\n    pass")])
    harness = HarnessConfig(prompt="base", episode_timeout_s=1.0, cell_timeout_s=30.0)
    trace = episode(room, room_dir, root, extractive, harness)
    assert trace.status == "timeout"
    assert trace.wall_s >= 1.0


def test_model_failures_are_recorded_not_raised(room, room_dir, extractive):
    def boom(messages):
        raise RuntimeError("server went away")

    trace = episode(room, room_dir, ScriptedBackend(boom), extractive)
    assert trace.status == "error" and "server went away" in trace.end_reason

    small = ScriptedBackend([py("submit('x')")], context_tokens=50)
    trace = episode(room, room_dir, small, extractive)
    assert trace.status == "error" and trace.end_reason.startswith("root context limit")

    trace = episode(room, room_dir, ScriptedBackend([]), extractive, HarnessConfig(prompt="no-such-variant"))
    assert trace.status == "error" and "no-such-variant" in trace.end_reason
    assert all(t.status in STATUSES for t in [trace])


def test_context_limit_error_is_a_value_error_subclass():
    # run_episode catches it specifically to name the cause.
    assert issubclass(ContextLimitError, ValueError)


# --------------------------------------------------------------------------- the trace


def test_trace_round_trips_and_subcall_times_sit_in_their_turns(room, room_dir, extractive):
    root = ScriptedBackend(
        [
            py("a = llm_batch([f'=== {d.path} ===\\n{d.text}' for d in room.documents[:3]])\nprint(len(a))"),
            py(
                "b = llm_query('=== ' + room.documents[3].path + ' ===\\n' + room.documents[3].text)\nsubmit(b)"
            ),
        ]
    )
    trace = episode(room, room_dir, root, extractive)
    assert trace.status == "submitted"
    assert [c.turn_index for c in trace.subcalls] == [0, 0, 0, 1]
    for c in trace.subcalls:
        turn = trace.turns[c.turn_index]
        assert turn.started_s <= c.issued_s <= c.returned_s <= turn.ended_s
    blob = json.dumps(trace.to_dict())
    again = Trace.from_dict(json.loads(blob))
    assert again == trace
    assert again.to_dict() == trace.to_dict()
    # The conversation rebuilds from the turns.
    msgs = trace.messages()
    assert msgs[-1] == {"role": "assistant", "content": trace.turns[-1].completion}
    assert msgs[-2]["content"] == "3"


# --------------------------------------------------------------------------- depth 2


def test_depth_two_child_trace_is_nested(room, room_dir, extractive):
    paths = [d.path for d in room.documents[:3]]
    parent_program = py(
        f"a = rlm_query('List the change of control risks.', {paths!r})\nprint(a[:300])\nsubmit(a)"
    )
    child_program = py(
        "answers = llm_batch([f'=== {d.path} ===\\n{d.text}' for d in room.documents])\n"
        "print(len(room.documents))\nsubmit('CHILD: ' + ' | '.join(answers))"
    )

    def script(messages):
        return child_program if "sub-reviewer" in messages[-1]["content"] else parent_program

    root = ScriptedBackend(script, name="root-model")
    harness = HarnessConfig(prompt="base", max_depth=2)
    trace = episode(room, room_dir, root, extractive, harness)
    assert trace.status == "submitted", trace.end_reason
    assert len(trace.children) == 1
    child = trace.children[0]
    assert child.status == "submitted" and child.memo.startswith("CHILD: ")
    assert trace.memo == child.memo
    (rlm_call,) = trace.subcalls
    assert rlm_call.model == "rlm:root-model" and rlm_call.response == child.memo and rlm_call.depth == 1
    assert len(child.subcalls) == 3
    assert all(c.depth == 2 and c.parent_call == rlm_call.index for c in child.subcalls)
    # The child's times are on the parent's clock, inside the rlm_query call.
    assert all(rlm_call.issued_s <= c.issued_s <= c.returned_s <= rlm_call.returned_s for c in child.subcalls)
    # The child saw only its sub-room; its system prompt offers no further rlm_query.
    child_system = child.turns[0].new_messages[0]["content"]
    assert "3 documents" in child_system and "rlm_query" not in child_system
    assert "rlm_query" in trace.turns[0].new_messages[0]["content"]
    assert trace.usage["root-model"]["calls"] == 2  # the child's turn counts in the tree's usage
    assert Trace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace


def test_rlm_query_refused_beyond_max_depth(room, room_dir, extractive):
    path = room.documents[0].path
    root = ScriptedBackend([py(f"print(rlm_query('x', [{path!r}]))"), py("submit('x')")])
    trace = episode(room, room_dir, root, extractive, HarnessConfig(prompt="base", max_depth=1))
    assert root.calls[1][0][-1]["content"].startswith("ERROR: rlm_query is not available")
    assert trace.children == [] and trace.subcalls == []


def test_harness_config_is_not_mutated(room, room_dir, extractive):
    harness = HarnessConfig(prompt="base")
    before = dataclasses.asdict(harness)
    episode(room, room_dir, ScriptedBackend([py("submit('x')")]), extractive, harness)
    assert dataclasses.asdict(harness) == before
