"""Dataset stage against a real DuckDB warehouse and the embedded model's tokenizer.

``make_warehouse`` builds a small warehouse by hand (rooms, the base policy,
root traces with a worked example, REPL outputs and subagent calls, one
selection) and is shared with tests/stages/test_train.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.policies import base_policy, register_policy
from pipeline.trace_store import trace_extras

SYSTEM = (
    "You are the root agent of a due-diligence review. The data room is loaded in a Python REPL as `room`. "
    "Write Python in ```python blocks; only what you print comes back to you. Delegate reading with "
    "llm_query(prompt) or llm_batch(prompts). Finish with submit(memo)."
)
EXAMPLE_TASK = "Worked example. Review the data room of Acme Widgets Ltd (share purchase) and write a memo."
EXAMPLE_CODE = "```python\nfor d in room.docs():\n    print(d.path, d.n_tokens)\n```"
EXAMPLE_OUTPUT = "01_corporate/articles.txt 812\n03_material_contracts/supply.txt 2210"
SUBAGENT_PROMPT = "SUBAGENT-PROMPT: list change-of-control clauses in this contract"


def root_trace(trajectory_id: str, room: str, policy_id: str, n_turns: int = 3, repl_chars: int = 0) -> Trace:
    """A plausible root conversation: system, worked example (marked), task, code turns, REPL outputs."""
    first = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": EXAMPLE_TASK, "example": True},
        {"role": "assistant", "content": EXAMPLE_CODE, "example": True},
        {"role": "user", "content": EXAMPLE_OUTPUT, "example": True},
        {"role": "user", "content": f"Review the data room of {room} and write a diligence memo."},
    ]
    turns = []
    for i in range(n_turns):
        new = first if i == 0 else [{"role": "user", "content": repl_output(room, i, repl_chars)}]
        if i < n_turns - 1:
            completion = (
                f"Turn {i}: I will look at the {['contracts', 'minutes', 'litigation'][i % 3]} folder.\n"
                "```python\n"
                f"docs = room.docs(category={['contracts', 'corporate', 'litigation'][i % 3]!r})\n"
                "answers = llm_batch([f'Find change-of-control terms:\\n{d.text}' for d in docs])\n"
                "for d, a in zip(docs, answers):\n    print(d.path, '->', a[:200])\n```"
            )
        else:
            completion = f'```python\nsubmit("Memo for {room}: the supply agreement has a change-of-control clause.")\n```'
        turns.append(Turn(index=i, new_messages=new, completion=completion, code="...", output="..."))
    subcalls = [
        Subcall(
            index=j,
            turn_index=0,
            depth=1,
            model="extractive",
            prompt=SUBAGENT_PROMPT,
            response="SUBAGENT-ANSWER",
        )
        for j in range(2)
    ]
    return Trace(
        trajectory_id=trajectory_id,
        room=room,
        policy_id=policy_id,
        turns=turns,
        subcalls=subcalls,
        memo=f"Memo for {room}",
        status="submitted",
        end_reason="submit",
        started_at="2025-01-01T00:00:00",
    )


def repl_output(room: str, i: int, extra_chars: int) -> str:
    body = "\n".join(
        f"0{k}_contracts/{room}-agreement-{k}.txt -> Section {k}.2: change of control" for k in range(3)
    )
    return body + ("\n" + "x " * (extra_chars // 2) if extra_chars else "")


def fill_required(con, table: str, rows: list[dict]) -> list[dict]:
    """Give every NOT NULL column without a default a neutral value, so the fixture follows schema growth."""
    cols = con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_name = ? and is_nullable = 'NO' and column_default is null",
        [table],
    ).fetchall()
    neutral = {"VARCHAR": "", "JSON": {}, "BOOLEAN": False, "TIMESTAMP": db.now()}
    return [{**{c: neutral.get(t, 0) for c, t in cols if c not in r}, **r} for r in rows]


def make_warehouse(
    tmp_path: Path,
    rooms: tuple[str, ...] = ("room-a", "room-b", "room-c", "room-d"),
    per_room: int = 2,
    long_one: bool = True,
    accept: bool = True,
    n_turns: int = 3,
) -> PipelineConfig:
    """A warehouse with rooms, the base policy, accepted traces, one rejected and one too-long trace."""
    cfg = PipelineConfig()
    cfg.run.dir = str(tmp_path / "run")
    cfg.dataset.max_length = 1024
    cfg.dataset.val_fraction = 0.25
    con = db.connect(cfg.run.db_path)
    policy_id = register_policy(con, base_policy(cfg))
    room_rows, traj_rows, turn_rows, call_rows, sel_rows = [], [], [], [], []
    for r in rooms:
        room_rows.append(
            {"room_id": r, "name": r, "source": "generated", "split": "train", "seed": 0, "target": {"name": r},
             "deal": {"type": "share purchase"}, "n_documents": 3, "n_tokens": 3000, "created_at": db.now()}
        )  # fmt: skip
    specs = [(f"{r}-t{k}", r, 0) for r in rooms for k in range(per_room)]
    if long_one:
        specs.append((f"{rooms[0]}-long", rooms[0], 6000))
    specs.append((f"{rooms[0]}-rejected", rooms[0], 0))
    for idx, (tid, room, extra) in enumerate(specs):
        trace = root_trace(tid, room, policy_id, n_turns=n_turns, repl_chars=extra)
        traj_rows.append(
            {"trajectory_id": tid, "room_id": room, "policy_id": policy_id, "sample_index": idx, "purpose": "train",
             "harness": "rlm", "status": "submitted", "end_reason": "submit", "memo": trace.memo,
             "n_turns": len(trace.turns), "n_subcalls": len(trace.subcalls), "root_prompt_tokens": 0,
             "root_completion_tokens": 0, "sub_prompt_tokens": 0, "sub_completion_tokens": 0, "wall_s": 1.0,
             "started_at": db.now(), "trace": trace_extras(trace)}
        )  # fmt: skip
        # The normalised layout load_traces reads: the root's turns and its subagent calls in their tables.
        turn_rows += [
            {"trajectory_id": tid, "turn_index": t.index, "new_messages": t.new_messages, "completion": t.completion,
             "code": t.code, "output": t.output}
            for t in trace.turns
        ]  # fmt: skip
        call_rows += [
            {"trajectory_id": tid, "call_index": c.index, "turn_index": c.turn_index, "depth": c.depth,
             "model": c.model, "prompt": c.prompt, "response": c.response}
            for c in trace.subcalls
        ]  # fmt: skip
        ok = accept and not tid.endswith("rejected")
        sel_rows.append(
            {"selection_id": "sel-1", "trajectory_id": tid, "accepted": ok,
             "reason": "accepted" if ok else "min_score", "params": {"min_score": 0.3, "min_coverage": 0.5},
             "created_at": db.now()}
        )  # fmt: skip
    tables = {"rooms": room_rows, "trajectories": traj_rows, "turns": turn_rows, "subcalls": call_rows,
              "selections": sel_rows}  # fmt: skip
    db.write_many(con, {t: fill_required(con, t, rows) for t, rows in tables.items()})
    con.close()
    cfg.dataset.selection_id = "sel-1"  # the selection written above, named as the CLI would
    return cfg


@pytest.fixture
def warehouse(tmp_path: Path) -> PipelineConfig:
    return make_warehouse(tmp_path)


# ----------------------------------------------------------------------------- fast unit tests


def test_split_rooms_is_deterministic_and_keeps_both_sides():
    from pipeline.training.dataset import split_rooms

    rooms = [f"r{i}" for i in range(10)]
    train, val = split_rooms(rooms, 0.2, seed=3)
    assert (train, val) == split_rooms(list(reversed(rooms)), 0.2, seed=3)
    assert len(val) == 2 and set(train) | set(val) == set(rooms) and not set(train) & set(val)
    assert split_rooms(["a", "b"], 0.0, seed=0)[1] != []  # >= 2 rooms: validation never empty
    assert split_rooms(["a", "b"], 1.0, seed=0)[0] != []  # ... and train never empty
    assert split_rooms(["only"], 0.5, seed=0) == (["only"], [])


def test_context_distillation_removes_worked_example():
    from pipeline.training.dataset import root_messages

    trace = root_trace("t", "room-a", "p")
    kept = root_messages(trace, context_distillation=False)
    stripped = root_messages(trace, context_distillation=True)
    assert sum(m.get("example", False) for m in kept) == 3
    assert not any(m.get("example", False) for m in stripped)
    assert len(kept) - len(stripped) == 3 and stripped[0]["role"] == "system"


def test_no_selection_and_zero_accepted_are_clear_errors(tmp_path: Path):
    from pipeline.cli import main
    from pipeline.steps import MissingInput
    from pipeline.training.errors import NoAcceptedTrajectories, NoSelectionError
    from stages import dataset

    cfg = PipelineConfig()
    cfg.run.dir = str(tmp_path / "empty")
    db.connect(cfg.run.db_path).close()
    with pytest.raises(MissingInput, match="dataset.selection_id is empty"):
        dataset.run(cfg)
    cfg.dataset.selection_id = "sel-nope"
    with pytest.raises(NoSelectionError, match="no selection 'sel-nope'"):
        dataset.run(cfg)
    # From the command line: no filter run yet is one line naming the step to run.
    assert main(["dataset", f"run.dir={cfg.run.dir}"]) == 1

    cfg = make_warehouse(tmp_path / "none", accept=False)
    with pytest.raises(NoAcceptedTrajectories, match="accepted no trajectories"):
        dataset.run(cfg)
    # The command line turns it into one line and exit status 1.
    assert main(["dataset", "--selection", "sel-1", f"run.dir={cfg.run.dir}"]) == 1


# ----------------------------------------------------------------------------- the real stage


@pytest.mark.slow
def test_dataset_stage_builds_masks_splits_card_and_registers(warehouse: PipelineConfig, smollm2_path: Path):
    import datasets
    from transformers import AutoTokenizer

    from stages import dataset

    counts = dataset.run(warehouse)
    assert counts["reused"] is False
    assert (counts["accepted"], counts["dropped_too_long"]) == (9, 1)
    assert counts["train"] + counts["validation"] == 8 and counts["validation"] == 2

    assert counts["path"] == f"datasets/{counts['dataset_id']}"  # stored relative to the run folder
    folder = Path(warehouse.run.dir) / counts["path"]
    dsd = datasets.load_from_disk(str(folder / "hf"))
    for split in ("train", "validation"):
        assert (folder / "parquet" / f"{split}.parquet").exists()
        from_parquet = datasets.Dataset.from_parquet(str(folder / "parquet" / f"{split}.parquet"))
        assert list(from_parquet["trajectory_id"]) == list(dsd[split]["trajectory_id"])

    # Split by room: no room on both sides.
    train_rooms, val_rooms = set(dsd["train"]["room_id"]), set(dsd["validation"]["room_id"])
    assert train_rooms and val_rooms and not train_rooms & val_rooms

    # Masks: exactly the root's completions (+ end-of-turn) are trained.
    tok = AutoTokenizer.from_pretrained(smollm2_path)
    ex = dsd["train"][0]
    assert len(ex["input_ids"]) == len(ex["labels"]) == ex["n_tokens"] <= 1024
    assert (
        ex["input_ids"]
        == tok.apply_chat_template(ex["messages"], tokenize=True, return_dict=True)["input_ids"]
    )
    trained_text = tok.decode(
        [t for t, lab in zip(ex["input_ids"], ex["labels"], strict=True) if lab != -100]
    )
    root_turns = [m["content"] for m, f in zip(ex["messages"], ex["trained_messages"], strict=True) if f]
    assert trained_text == "".join(c + "<|im_end|>" for c in root_turns)
    for text in (SYSTEM, EXAMPLE_TASK, EXAMPLE_CODE, EXAMPLE_OUTPUT, "Section 0.2"):
        assert text not in trained_text
    everything = json.dumps(list(dsd["train"]["messages"]) + list(dsd["validation"]["messages"]))
    assert SUBAGENT_PROMPT not in everything and "SUBAGENT-ANSWER" not in everything
    assert EXAMPLE_CODE in dsd["train"][0]["messages"][2]["content"]  # kept (masked) in the prompt

    # Card and registration.
    card = json.loads((folder / "card.json").read_text())
    assert card["selection_id"] == "sel-1" and card["filter_params"]["min_score"] == 0.3
    assert card["context_distillation"] is False and card["counts"]["dropped_too_long"] == 1
    assert card["trajectory_ids"]["dropped"] == ["room-a-long"]
    assert "room-a-rejected" not in json.dumps(card["trajectory_ids"])
    assert card["token_stats"]["train"]["trained_tokens"] == sum(list(dsd["train"]["n_trained"]))
    assert card["tokenizer"]["boundary_mismatches"] == 0
    assert "sel-1" in (folder / "README.md").read_text()
    con = db.connect(warehouse.run.db_path)
    row = db.fetch_dicts(con, "select * from datasets")[0]
    assert (row["version"], row["n_train"], row["n_validation"], row["n_dropped_too_long"]) == (
        1, counts["train"], counts["validation"], 1
    )  # fmt: skip
    splits = dict(con.execute("select split, count(*) from dataset_examples group by split").fetchall())
    assert splits == {"train": counts["train"], "validation": 2, "dropped": 1}
    con.close()

    # Same selection + config: reused, nothing written.
    again = dataset.run(warehouse)
    assert again["reused"] is True and again["dataset_id"] == counts["dataset_id"]
    # Context distillation is a new dataset version without the worked example.
    warehouse.dataset.context_distillation = True
    cd = dataset.run(warehouse)
    assert cd["reused"] is False and cd["version"] == 2 and cd["dataset_id"] != counts["dataset_id"]
    cd_folder = Path(warehouse.run.dir) / cd["path"]
    cd_ds = datasets.load_from_disk(str(cd_folder / "hf"))
    assert EXAMPLE_CODE not in json.dumps(list(cd_ds["train"]["messages"]))
    assert json.loads((cd_folder / "card.json").read_text())["context_distillation"] is True
    con = db.connect(warehouse.run.db_path)
    assert con.execute("select count(*) from datasets").fetchone()[0] == 2
    con.close()


@pytest.mark.slow
def test_one_room_dataset_has_an_empty_validation_split_that_training_can_load(
    tmp_path: Path, smollm2_path: Path
):
    # make distill once accepted two trajectories of one room: the dataset saved an empty validation
    # split as zero shards, and the train stage crashed reading it back.
    from pipeline.training.sft import load_splits
    from stages import dataset

    cfg = make_warehouse(tmp_path, rooms=("room-a",), long_one=False)
    counts = dataset.run(cfg)
    assert (counts["train"], counts["validation"]) == (2, 0)
    train, val = load_splits(Path(cfg.run.dir) / counts["path"])
    assert len(train) == 2 and val is None
