"""Prompt variants: files load, the worked example is marked and true, the room shape is described."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.harness import prompts
from pipeline.harness.prompts import (
    PromptError,
    build_messages,
    load_variant,
    render,
    room_info,
    strip_extra_keys,
    variant_names,
)
from pipeline.rooms.model import count_tokens
from pipeline.rooms.synthetic.generator import generate_room


@pytest.fixture(scope="module")
def room():
    return generate_room("prompt-test", seed=5, n_documents=12, tokens_per_document=200)


def test_variants_load():
    names = variant_names()
    assert {"base", "worked_example", "toolloop"} <= set(names)
    for name in names:
        v = load_variant(name)
        assert v.system and v.task and v.harness in ("rlm", "toolloop")
    assert load_variant("base").example == []
    assert load_variant("toolloop").harness == "toolloop"


def test_worked_example_messages_are_marked(room):
    v = load_variant("worked_example")
    episode = ["user", "assistant", "user"]  # task, program, REPL output
    assert [m["role"] for m in v.example] == episode * 2
    assert all(m["example"] is True for m in v.example)
    msgs = build_messages(v, room_info(room, variant=v))
    assert [m["role"] for m in msgs] == ["system", *episode * 2, "user"]
    assert [bool(m.get("example")) for m in msgs] == [False, *[True] * 6, False]
    # The examples are about other rooms; the task is about this one.
    assert "Heron Robotics" in msgs[1]["content"] and "Osprey Foods" in msgs[4]["content"]
    assert room.target["name"] in msgs[-1]["content"]
    assert all(set(m) == {"role", "content"} for m in strip_extra_keys(msgs))


def _example_programs() -> list[str]:
    """Each worked episode's code (one turn each) as a program."""
    turns = [m["content"] for m in load_variant("worked_example").example if m["role"] == "assistant"]
    return [t.split("```python\n", 1)[1].split("```", 1)[0] for t in turns]


def test_the_worked_episodes_read_different_categories():
    """Which part of the room to read is shown as a choice: each episode names other categories."""
    import re

    chosen = [set(re.findall(r'category="(\w+)"', p)) for p in _example_programs()]
    assert len(chosen) == 2 and all(len(c) == 2 for c in chosen) and not chosen[0] & chosen[1]


@pytest.mark.parametrize("program", _example_programs())
def test_worked_example_shows_the_api_not_the_answer(program):
    """It delegates, writes a line per fact and submits, reading part of the room and joining
    nothing: no program of the ladder's `everything` rung or above."""
    for piece in (
        "room.docs(category=",
        "d.chunks(",
        "=== {d.path} ===",
        "llm_batch(",
        "json.loads(",
        "submit(",
    ):
        assert piece in program, piece
    for answer in ("room.documents", "Resolved", "total", "not in the data room", "Next step"):
        assert answer not in program, answer
    assert count_tokens(program) <= 192


@pytest.mark.slow  # runs the ladder through the sandboxed REPL (a worker process per episode)
def test_worked_example_scores_below_the_everything_rung():
    """Played as a fixed program on the program-check rooms, the example sits below `everything`."""
    from pipeline.config import BackendConfig, HarnessConfig
    from pipeline.grading.program_check import Rung, generated_rooms, ladder_table, load_ladder, run_ladder
    from pipeline.llm.base import make_backend

    examples = [Rung(f"example-{i}", "", p) for i, p in enumerate(_example_programs())]
    rungs = [r for r in load_ladder() if r.name == "everything"] + examples
    rooms = [("generated", r) for r in generated_rooms(4)]
    rows = asyncio.run(
        run_ladder(rooms, make_backend(BackendConfig(kind="extractive")), HarnessConfig(), rungs)
    )
    cells = {c.rung: c for c in ladder_table(rows, rungs)}
    assert all(r.status == "submitted" for r in rows), rows
    for rung in examples:
        assert 0 < cells[rung.name].mean < cells["everything"].mean - 0.05, cells


def test_worked_example_output_is_what_its_program_prints():
    from pipeline.harness.root import replay_example

    v = load_variant("worked_example")
    after_a_program = [
        m for prev, m in zip(v.example[:-1], v.example[1:], strict=True) if prev["role"] == "assistant"
    ]
    recorded = [m["content"] for m in after_a_program]
    assert len(recorded) == 2 and asyncio.run(replay_example("worked_example")) == recorded


def test_room_shape_in_system_prompt(room):
    v = load_variant("base")
    info = room_info(room, subagent_context_tokens=3000, output_chars=1234, max_turns=6, variant=v)
    system = build_messages(v, info)[0]["content"]
    assert room.target["name"] in system and room.deal["buyer"] in system
    assert f"{len(room.documents)} documents" in system and f"{room.n_tokens:,} tokens" in system
    for top in {d.path.split("/", 1)[0] for d in room.documents}:
        cat = next(d.category for d in room.documents if d.path.startswith(top + "/"))
        assert f"- {top}/ (category {cat}):" in system
    assert "3,000 tokens" in system and "1,234 characters" in system and "6 turns" in system
    # The REPL API and the task.
    for api in (
        "llm_query",
        "llm_batch",
        "submit(memo)",
        "print()",
        "```python",
        "d.chunks(max_tokens)",
        "`documents`",
    ):
        assert api in system, api
    for word in ("memo", "cite", "next steps", "exposure"):
        assert word in system
    assert "rlm_query" not in system


def test_depth2_line_only_when_children_are_allowed(room):
    v = load_variant("base")
    flat = build_messages(v, room_info(room, depth=1, max_depth=1, variant=v))[0]["content"]
    deep = build_messages(v, room_info(room, depth=1, max_depth=2, variant=v))[0]["content"]
    leaf = build_messages(v, room_info(room, depth=2, max_depth=2, variant=v))[0]["content"]
    assert "rlm_query" in deep and "rlm_query" not in flat and "rlm_query" not in leaf
    # No blank line is left where the optional line was.
    assert "\n\n- `submit" not in flat


def test_prompt_fits_a_small_model(room):
    v = load_variant("worked_example")
    msgs = build_messages(v, room_info(room, variant=v))
    assert sum(count_tokens(m["content"]) for m in msgs) < 2000


def test_render_rejects_unknown_placeholders():
    assert render("a {{x}} b", {"x": 1}) == "a 1 b"
    assert render("a\n{{gone}}\nb", {"gone": ""}) == "a\nb"
    with pytest.raises(PromptError, match=r"where\.md \[system\]: unknown placeholder\(s\) nope"):
        render("{{nope}}", {}, where="where.md [system]")


def _write(dir_, name, text):
    (dir_ / f"{name}.md").write_text(text)


def test_bad_variant_files_name_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    _write(tmp_path, "nosys", "---\nharness: rlm\n---\n<!-- section: task -->\nT\n")
    with pytest.raises(PromptError, match=r"nosys\.md: missing required section 'system'"):
        load_variant("nosys")
    _write(
        tmp_path,
        "badkey",
        "---\nexampel: x.yaml\n---\n<!-- section: system -->\nS\n<!-- section: task -->\nT\n",
    )
    with pytest.raises(PromptError, match=r"badkey\.md: unknown front matter key\(s\) exampel"):
        load_variant("badkey")
    _write(tmp_path, "loop", "---\nextends: loop\n---\n")
    with pytest.raises(PromptError, match="loops back"):
        load_variant("loop")
    _write(tmp_path, "nofront", "<!-- section: system -->\nS\n")
    with pytest.raises(PromptError, match="front matter"):
        load_variant("nofront")
    with pytest.raises(PromptError, match=r"unknown prompt variant 'missing'"):
        load_variant("missing")
    _write(
        tmp_path, "ex", "---\nexample: ex.yaml\n---\n<!-- section: system -->\nS\n<!-- section: task -->\nT\n"
    )
    (tmp_path / "ex.yaml").write_text(
        "room: {name: r, target: {}, deal: {}, documents: [{path: a.txt}]}\nturns: []\n"
    )
    with pytest.raises(PromptError, match=r"ex\.yaml: room\.documents\[0\]"):
        load_variant("ex")


def test_extends_inherits_sections_but_not_the_example(tmp_path, monkeypatch):
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    _write(
        tmp_path,
        "parent",
        "---\nharness: rlm\n---\n<!-- section: system -->\nS {{room_name}}\n<!-- section: task -->\nT\n",
    )
    _write(tmp_path, "child", "---\nextends: parent\n---\n<!-- section: task -->\nCHILD TASK\n")
    v = load_variant("child")
    assert v.system == "S {{room_name}}" and v.task == "CHILD TASK" and v.harness == "rlm"


def test_a_policy_id_changes_with_the_variants_text_not_its_description(tmp_path, monkeypatch):
    from pipeline import db
    from pipeline.config import load_config
    from pipeline.policies import base_policy, load_policy, register_policy

    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    body = "<!-- section: system -->\nS {{room_name}}\n<!-- section: task -->\nT\n"
    _write(tmp_path, "mine", "---\ndescription: one\n---\n" + body)
    cfg = load_config("tiny", ["harness.prompt=mine"])
    first = base_policy(cfg)
    _write(tmp_path, "mine", "---\ndescription: two\n---\n" + body)
    assert base_policy(cfg).policy_id == first.policy_id  # what people read is not what the model reads
    _write(tmp_path, "mine", "---\ndescription: two\n---\n" + body.replace("T\n", "Review it.\n"))
    edited = base_policy(cfg)
    assert edited.prompt == first.prompt and edited.policy_id != first.policy_id
    # stored and read back from a real warehouse, the policy keeps its hash and so its id
    con = db.connect(tmp_path / "w.duckdb")
    register_policy(con, edited)
    assert load_policy(con, edited.policy_id) == edited
    con.close()
