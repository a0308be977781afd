"""The tool-loop baseline with a scripted root over a generated room."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline.config import HarnessConfig, SamplingConfig
from pipeline.harness.prompts import load_variant
from pipeline.harness.room_export import export_room
from pipeline.harness.toolloop import ToolCallError, parse_tool_call, run_toolloop_episode
from pipeline.harness.trace import Trace
from pipeline.rooms.synthetic.generator import generate_room
from tests.doubles import ScriptedBackend


def tool(name: str, **args) -> str:
    return f"```tool\n{json.dumps({'name': name, 'args': args})}\n```\n"


@pytest.fixture(scope="module")
def room():
    return generate_room("toolloop-test", seed=3, n_documents=8, tokens_per_document=300)


@pytest.fixture(scope="module")
def room_dir(room, tmp_path_factory):
    return export_room(room, tmp_path_factory.mktemp("rooms") / room.name)


def episode(room, room_dir, root, **harness_kw):
    harness = HarnessConfig(kind="toolloop", prompt="toolloop", **harness_kw)
    return asyncio.run(
        run_toolloop_episode(
            room, room_dir, root, None, harness, SamplingConfig(), trajectory_id="t", policy_id="p"
        )
    )


def test_parse_tool_call_shapes():
    assert parse_tool_call(tool("read", path="a.txt")) == ("read", {"path": "a.txt"})
    openai_style = '{"name": "search", "arguments": "{\\"pattern\\": \\"change of control\\"}"}'
    assert parse_tool_call(openai_style) == ("search", {"pattern": "change of control"})
    wrapped = {
        "tool_calls": [{"type": "function", "function": {"name": "list_folder", "arguments": {"folder": ""}}}]
    }
    assert parse_tool_call("Calling:\n" + json.dumps(wrapped)) == ("list_folder", {"folder": ""})
    assert parse_tool_call('I will submit. {"name": "submit", "args": {"memo": "m"}}') == (
        "submit",
        {"memo": "m"},
    )
    assert parse_tool_call("no call here") is None
    with pytest.raises(ToolCallError, match="valid JSON"):
        parse_tool_call("```tool\n{name: read}\n```")
    with pytest.raises(ToolCallError, match='no "name"'):
        parse_tool_call('```tool\n{"args": {}}\n```')


def test_tools_and_submit(room, room_dir):
    doc = room.documents[0]
    top = doc.path.split("/", 1)[0]
    word = doc.text.split()[3]
    root = ScriptedBackend(
        [
            tool("list_folder", folder=""),
            tool("list_folder", folder=top),
            tool("search", pattern=word),
            tool("read", path=doc.path, offset=0, length=120),
            tool("submit", memo=f"Finding in {doc.path}."),
        ],
        name="root-model",
    )
    trace = episode(room, room_dir, root, max_turns=6)
    assert trace.status == "submitted" and trace.memo == f"Finding in {doc.path}."
    assert trace.harness == "toolloop" and trace.subcalls == []
    outputs = [t.output for t in trace.turns]
    assert f"[folder] {top}/" in outputs[0]
    assert "hits for" in outputs[2] and doc.path in outputs[2]
    assert outputs[3] == f"{doc.path} [characters 0-120 of {len(doc.text)}]\n{doc.text[:120]}"
    # Each tool result is the next user message, exactly as recorded.
    for i in range(4):
        assert root.calls[i + 1][0][-1] == {"role": "user", "content": outputs[i]}
    assert json.loads(trace.turns[3].code) == {
        "name": "read",
        "args": {"path": doc.path, "offset": 0, "length": 120},
    }
    assert trace.submit_turn_started_s == trace.turns[-1].started_s
    assert Trace.from_dict(json.loads(json.dumps(trace.to_dict()))) == trace


def test_bad_calls_get_an_error_and_the_loop_goes_on(room, room_dir):
    root = ScriptedBackend(
        [tool("delete", path="x"), tool("read", path="nope.txt"), "I think so.", tool("submit", memo="m")]
    )
    trace = episode(room, room_dir, root, max_turns=5)
    assert trace.status == "submitted"
    assert trace.turns[0].output.startswith("ERROR: unknown tool 'delete'")
    assert "no document 'nope.txt'" in trace.turns[1].output
    assert trace.turns[2].output == load_variant("toolloop").section("no_tool", {})


def test_read_is_cut_at_output_chars(room, room_dir):
    doc = max(room.documents, key=lambda d: len(d.text))
    root = ScriptedBackend([tool("read", path=doc.path, length=100_000), tool("submit", memo="m")])
    trace = episode(room, room_dir, root, output_chars=300)
    shown = trace.turns[0].output
    header, piece = shown.split("\n", 1)
    end = int(header.split("characters 0-")[1].split(" ")[0])
    assert len(shown) <= 300 and 0 < end < 300
    assert piece == doc.text[:end] and header.endswith(f"of {len(doc.text)}]")


def test_turn_limit_asks_once(room, room_dir):
    root = ScriptedBackend([tool("list_folder", folder=""), "My memo: no issues."])
    trace = episode(room, room_dir, root, max_turns=1)
    assert trace.status == "turn_limit" and trace.memo == "My memo: no issues."
    assert len(root.calls) == 2
    assert root.calls[1][0][-1]["content"] == load_variant("toolloop").section("final", {})


def test_rlm_variant_is_refused(room, room_dir):
    harness = HarnessConfig(kind="toolloop", prompt="worked_example")
    trace = asyncio.run(
        run_toolloop_episode(
            room,
            room_dir,
            ScriptedBackend([]),
            None,
            harness,
            SamplingConfig(),
            trajectory_id="t",
            policy_id="p",
        )
    )
    assert trace.status == "error" and "harness.prompt=toolloop" in trace.end_reason
