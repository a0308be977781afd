"""Train stage end to end on the embedded model: a real warehouse, TRL SFT + LoRA, a new policy.

One module-scoped run (2 steps, r=4) is shared by the tests; the last one
simulates a killed run and resumes it from its checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.policies import base_policy, load_policy
from tests.stages.test_dataset import make_warehouse

# One worker for the whole module under `make test` (xdist --dist loadgroup): split over two, each
# worker trained its own copy of the module-scoped run.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("train")]


def tiny_train(cfg: PipelineConfig) -> PipelineConfig:
    t = cfg.train
    t.epochs, t.lora_r, t.lora_alpha, t.batch_size, t.grad_accum = 1.0, 4, 8, 1, 1
    t.max_length, t.save_steps, t.eval_steps, t.logging_steps = 1024, 1, 2, 1
    return cfg


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path):
    from stages import dataset, train

    cfg = make_warehouse(tmp_path_factory.mktemp("train"), rooms=("room-a", "room-b", "room-c"), per_room=1,
                         long_one=False, n_turns=2)  # fmt: skip
    cfg.dataset.val_fraction = 0.3
    ds = dataset.run(cfg)
    assert (ds["train"], ds["validation"]) == (2, 1)
    cfg.train.dataset_id = ds["dataset_id"]
    counts = train.run(tiny_train(cfg))
    return cfg, counts


def test_adapter_is_trained_and_saved_in_peft_format(trained):
    from pipeline.training.sft import trained_lora_tensors

    cfg, counts = trained
    assert counts["skipped"] is False and counts["steps"] == 2
    assert counts["adapter_path"] == f"adapters/{counts['train_id']}"  # relative to the run folder
    adapter = Path(cfg.run.dir) / counts["adapter_path"]
    conf = json.loads((adapter / "adapter_config.json").read_text())
    assert conf["peft_type"] == "LORA" and conf["r"] == 4 and conf["lora_alpha"] == 8
    assert (adapter / "tokenizer_config.json").exists()
    lora_b = trained_lora_tensors(adapter)
    assert lora_b, "no lora_B tensors in the adapter"
    # lora_B starts at zero: training moved it.
    assert any(float(t.abs().max()) > 0 for t in lora_b.values())


def test_run_logs_and_policy_are_recorded(trained):
    cfg, counts = trained
    con = db.connect(cfg.run.db_path)
    try:
        logs = db.fetch_dicts(
            con, "select * from train_logs where train_id = ? order by step", [counts["train_id"]]
        )
        assert [r["step"] for r in logs] == [1, 2]
        assert all(r["loss"] is not None and r["learning_rate"] is not None for r in logs)
        assert logs[-1]["eval_loss"] is not None  # validation loss at the evaluated step (eval_steps=2)
        run = db.fetch_dicts(con, "select * from train_runs where train_id = ?", [counts["train_id"]])[0]
        assert run["status"] == "ok" and run["policy_id"] == counts["policy_id"]
        assert run["train_tokens"] > 0 and run["final_eval_loss"] == pytest.approx(logs[-1]["eval_loss"])
        policy = load_policy(con, counts["policy_id"])
        parent = base_policy(cfg)
        assert policy.parent_id == parent.policy_id == run["parent_policy_id"]
        assert policy.train_id == counts["train_id"] and policy.adapter == counts["adapter_path"]
        assert (policy.prompt, policy.harness, policy.sampling) == (
            parent.prompt,
            parent.harness,
            parent.sampling,
        )
    finally:
        con.close()


def test_second_run_does_nothing(trained):
    from stages import train

    cfg, counts = trained
    again = train.run(cfg)
    assert again["skipped"] is True
    assert (again["train_id"], again["policy_id"]) == (counts["train_id"], counts["policy_id"])
    con = db.connect(cfg.run.db_path)
    assert con.execute("select count(*) from train_runs").fetchone()[0] == 1
    assert con.execute("select count(*) from policies where adapter is not null").fetchone()[0] == 1
    con.close()


def test_adapter_loads_with_peft_and_generates(trained, smollm2_path: Path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg, counts = trained
    adapter = str(Path(cfg.run.dir) / counts["adapter_path"])
    tok = AutoTokenizer.from_pretrained(adapter)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(smollm2_path), adapter)
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Review the data room."}], add_generation_prompt=True, return_tensors="pt",
        return_dict=True,
    )  # fmt: skip
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > prompt["input_ids"].shape[1]


def test_killed_run_resumes_from_its_checkpoint(trained):
    import shutil

    from stages import train

    cfg, counts = trained
    adapter = Path(cfg.run.dir) / counts["adapter_path"]
    # Simulate a run killed after step 1: only checkpoint-1, no final adapter, train_runs still 'running'.
    shutil.rmtree(adapter / "checkpoints" / "checkpoint-2")
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        (adapter / name).unlink()
    con = db.connect(cfg.run.db_path)
    con.execute(
        "update train_runs set status = 'running', policy_id = null where train_id = ?", [counts["train_id"]]
    )
    con.execute("delete from train_logs where train_id = ? and step = 2", [counts["train_id"]])
    con.close()

    resumed = train.run(cfg)
    assert resumed["skipped"] is False
    assert resumed["resumed_from"].endswith("checkpoint-1")
    assert resumed["steps"] == 2 and resumed["train_id"] == counts["train_id"]
    assert resumed["policy_id"] == counts["policy_id"]  # same adapter folder, same policy
    assert (adapter / "adapter_model.safetensors").exists()
    con = db.connect(cfg.run.db_path)
    status, tokens = con.execute(
        "select status, train_tokens from train_runs where train_id = ?", [counts["train_id"]]
    ).fetchone()
    steps = [r[0] for r in con.execute("select step from train_logs where train_id = ? order by step",
                                       [counts["train_id"]]).fetchall()]  # fmt: skip
    con.close()
    assert status == "ok" and tokens == counts["train_tokens"]  # token count carried over from the checkpoint
    assert steps == [1, 2]
