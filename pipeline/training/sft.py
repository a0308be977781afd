"""LoRA SFT of a policy on a dataset (TRL SFTTrainer + peft) -> an adapter and a new policy.

The dataset's examples are already tokenized with root-only ``labels``, so
TRL uses them as they are: it neither re-tokenizes nor re-masks a dataset
with ``input_ids`` + ``labels`` columns. The LoRA settings and SFTConfig
fields come from the ``train`` section; ``train.extra`` is passed to
SFTConfig verbatim and wins over everything derived here.

``fit`` trains (or resumes from the last checkpoint) one planned run
(pipeline.training.plan). It writes the adapter + tokenizer to the plan's
adapter folder (``adapter_config.json`` + ``adapter_model.safetensors``: what
``PeftModel.from_pretrained`` and vLLM's ``--lora-modules`` load), checkpoints
under its ``checkpoints/``, and — given the warehouse, which only the main
process holds — loss / eval_loss / learning rate per logged step in
``train_logs``, the run in ``train_runs`` and a new policy whose parent is the
plan's parent policy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db, lineage
from pipeline.config import ConfigError, PipelineConfig
from pipeline.policies import Policy, load_policy, register_policy
from pipeline.run_folder import stored_path
from pipeline.training import base_model_path
from pipeline.training.errors import TrainError
from pipeline.training.plan import Plan


def lora_config(cfg: PipelineConfig) -> Any:
    from peft import LoraConfig

    t = cfg.train
    targets: str | list[str] = t.target_modules
    if list(targets) == ["all-linear"]:
        targets = "all-linear"  # peft's shorthand is a string, not a module name
    return LoraConfig(
        r=t.lora_r,
        lora_alpha=t.lora_alpha,
        lora_dropout=t.lora_dropout,
        target_modules=targets,
        task_type="CAUSAL_LM",
    )


def sft_config(cfg: PipelineConfig, output_dir: str, has_eval: bool) -> Any:
    import torch
    from trl import SFTConfig

    t = cfg.train
    on_gpu = torch.cuda.is_available()
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        "num_train_epochs": t.epochs,
        "learning_rate": t.learning_rate,
        "per_device_train_batch_size": t.batch_size,
        "per_device_eval_batch_size": t.batch_size,
        "gradient_accumulation_steps": t.grad_accum,
        # Padding-free without packing does not enforce max_length (TRL refuses the pair); the dataset
        # stage already dropped what is longer than dataset.max_length.
        "max_length": None if (t.padding_free and not t.packing) else t.max_length,
        "packing": t.packing,
        "padding_free": t.padding_free,
        "logging_steps": t.logging_steps,
        "save_strategy": "steps",
        "save_steps": t.save_steps,
        "eval_strategy": "steps" if has_eval else "no",
        "eval_steps": (t.eval_steps or t.save_steps) if has_eval else None,
        "report_to": "none",
        "seed": cfg.run.seed,
        "data_seed": cfg.run.seed,
        # TRL defaults to bf16 and gradient checkpointing; on CPU both only cost time.
        "bf16": on_gpu and torch.cuda.is_bf16_supported(),
        "include_num_input_tokens_seen": "non_padding",
        # Labels are prebuilt; these make sure TRL adds no masking of its own.
        "assistant_only_loss": False,
        "completion_only_loss": False,
        "dataset_num_proc": None,
        "disable_tqdm": True,
    }
    # transformers 5 renamed gradient_checkpointing; the old name still works but warns.
    names = {f.name for f in dataclasses.fields(SFTConfig)}
    if not {"gradient_checkpointing", "activation_checkpointing"} & set(t.extra):
        kwargs[
            "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
        ] = on_gpu
    kwargs.update(t.extra)
    try:
        return SFTConfig(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"train.extra: {exc}") from exc


def load_splits(path: str) -> tuple[Any, Any]:
    """(train, validation or None) of a dataset folder, reduced to ``input_ids`` + ``labels``."""
    from datasets import load_from_disk

    folder = Path(path) / "hf"
    if not folder.exists():
        raise TrainError(
            f"{folder}: the dataset's save_to_disk folder is missing (rebuild it with the dataset stage)"
        )
    dsd = load_from_disk(str(folder))
    cols = ["input_ids", "labels"]
    for split in dsd:
        missing = set(cols) - set(dsd[split].column_names)
        if missing:
            raise TrainError(f"{folder}: split {split!r} lacks columns {sorted(missing)}")
    train = dsd["train"].select_columns(cols)
    val = dsd["validation"].select_columns(cols) if "validation" in dsd and len(dsd["validation"]) else None
    if len(train) == 0:
        raise TrainError(f"{folder}: the train split is empty")
    return train, val


def _log_callback(con: duckdb.DuckDBPyConnection | None, train_id: str) -> Any:
    from transformers import TrainerCallback

    class WarehouseLogs(TrainerCallback):
        """Loss, eval_loss and learning rate per logged step into train_logs (main process only)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if con is None or not state.is_world_process_zero or not logs:
                return
            values = [logs.get(k) for k in ("loss", "eval_loss", "learning_rate")]
            if all(v is None for v in values):
                return  # e.g. the end-of-training summary
            # Train and eval logs of the same step merge into one row; a resumed run re-logs steps.
            con.execute(
                """
                insert into train_logs (train_id, step, epoch, loss, eval_loss, learning_rate, logged_at)
                values (?, ?, ?, ?, ?, ?, ?)
                on conflict (train_id, step) do update set
                    epoch = coalesce(excluded.epoch, train_logs.epoch),
                    loss = coalesce(excluded.loss, train_logs.loss),
                    eval_loss = coalesce(excluded.eval_loss, train_logs.eval_loss),
                    learning_rate = coalesce(excluded.learning_rate, train_logs.learning_rate),
                    logged_at = excluded.logged_at
                """,
                [train_id, state.global_step, logs.get("epoch", state.epoch), *values, db.now()],
            )

    return WarehouseLogs()


def _mark_running(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: Plan, adapter_dir: Path) -> None:
    if plan.status is None:
        db.write_rows(
            con,
            "train_runs",
            [
                {
                    "train_id": plan.train_id,
                    "dataset_id": plan.dataset_id,
                    "parent_policy_id": plan.parent_policy_id,
                    "config_hash": plan.config_hash,
                    "adapter_path": stored_path(cfg.run.dir, adapter_dir),
                    "status": "running",
                    "started_at": db.now(),
                }
            ],
        )
    else:
        con.execute(
            "update train_runs set status = 'running', ended_at = null where train_id = ?", [plan.train_id]
        )


def fit(cfg: PipelineConfig, plan: Plan, con: duckdb.DuckDBPyConnection | None) -> dict[str, Any]:
    """Train (or resume) one run; ``con`` is the warehouse on the main process, None elsewhere."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTTrainer

    if not torch.cuda.is_available():
        # The sampler may have set a smaller process-wide thread count for generation.
        from pipeline.llm.local import sensible_threads

        torch.set_num_threads(sensible_threads())
    adapter_dir = Path(plan.adapter_dir)
    ckpt_dir = adapter_dir / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    if con is not None:
        _mark_running(con, cfg, plan, adapter_dir)

    try:
        train_ds, val_ds = load_splits(plan.dataset_path)
        base = base_model_path(plan.base_model, cfg.serve.models)
        tokenizer = AutoTokenizer.from_pretrained(base)
        args = sft_config(cfg, str(ckpt_dir), has_eval=val_ds is not None)
        dtype = torch.bfloat16 if args.bf16 else torch.float32
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=train_ds,
            eval_dataset=val_ds,
            processing_class=tokenizer,
            peft_config=lora_config(cfg),
            callbacks=[_log_callback(con, plan.train_id)],
        )
        resume = get_last_checkpoint(str(ckpt_dir))
        t0 = time.monotonic()
        result = trainer.train(resume_from_checkpoint=resume)
        final_eval: dict[str, Any] = {}
        if val_ds is not None:
            # The trainer may already have evaluated at the last step (eval_steps dividing it).
            last = [h for h in trainer.state.log_history if "eval_loss" in h]
            if last and last[-1].get("step") == trainer.state.global_step:
                final_eval = last[-1]
            else:
                final_eval = trainer.evaluate()
        seconds = time.monotonic() - t0
        trainer.save_model(str(adapter_dir))  # PEFT: adapter_config.json + adapter_model.safetensors
    except BaseException:
        if con is not None:
            con.execute(
                "update train_runs set status = 'failed', ended_at = ? where train_id = ?",
                [db.now(), plan.train_id],
            )
        raise

    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    out = {
        "skipped": False,
        "train_id": plan.train_id,
        "dataset_id": plan.dataset_id,
        "adapter_path": stored_path(cfg.run.dir, adapter_dir),
        "resumed_from": resume and stored_path(cfg.run.dir, resume),
        "steps": trainer.state.global_step,
        "train_tokens": int(trainer.state.num_input_tokens_seen or 0),
        "train_seconds": round(seconds, 2),
        "final_train_loss": losses[-1] if losses else result.training_loss,
        "final_eval_loss": final_eval.get("eval_loss"),
    }
    if con is None:
        return out
    tokenizer.save_pretrained(str(adapter_dir))
    return out | _record_policy(con, cfg, plan, out, seconds)


def _record_policy(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: Plan, out: dict[str, Any], seconds: float
) -> dict[str, Any]:
    """The trained adapter as a new policy (child of the plan's parent) and the run as finished."""
    adapter_dir = Path(plan.adapter_dir)
    parent = load_policy(con, plan.parent_policy_id)
    policy = Policy(
        base_model=parent.base_model,
        backend=parent.backend,
        prompt=parent.prompt,
        harness=parent.harness,
        sampling=parent.sampling,
        prompt_hash=parent.prompt_hash,
        # Relative to the run folder: a copied run folder still finds its adapters.
        adapter=stored_path(cfg.run.dir, adapter_dir),
        parent_id=parent.policy_id,
        train_id=plan.train_id,
    )
    (adapter_dir / "train_run.json").write_text(
        json.dumps(
            {
                "train_id": plan.train_id,
                "dataset_id": plan.dataset_id,
                "parent_policy_id": parent.policy_id,
                "policy_id": policy.policy_id,
                "base_model": parent.base_model,
                "config_hash": plan.config_hash,
                "train": asdict(cfg.train),
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    with db.transaction(con):
        pid = register_policy(con, policy)
        con.execute(
            """
            update train_runs set policy_id = ?, status = 'ok', train_tokens = ?, train_seconds = ?,
                final_train_loss = ?, final_eval_loss = ?, ended_at = ?
            where train_id = ?
            """,
            [
                pid,
                out["train_tokens"],
                seconds,
                out["final_train_loss"],
                out["final_eval_loss"],
                db.now(),
                plan.train_id,
            ],
        )
    write_lineage_card(con, adapter_dir, pid)
    return {"policy_id": pid, "parent_policy_id": parent.policy_id}


def write_lineage_card(con: duckdb.DuckDBPyConnection, adapter_dir: Path, policy_id: str) -> None:
    """The adapter's model card (PEFT's README.md) ends with the chain `pipeline lineage` prints."""
    card = adapter_dir / "README.md"
    text = card.read_text() if card.exists() else f"# {policy_id}\n"
    text = text.split("\n## Lineage\n")[0].rstrip("\n")
    chain = lineage.render(lineage.chain(con, policy_id))
    card.write_text(f"{text}\n\n## Lineage\n\n```\n{chain}\n```\n")


def trained_lora_tensors(adapter_dir: str | Path, names: Sequence[str] = ("lora_B",)) -> dict[str, Any]:
    """The adapter's tensors whose names contain any of ``names`` (for checks and reports)."""
    from safetensors.torch import load_file

    tensors = load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
    return {k: v for k, v in tensors.items() if any(n in k for n in names)}
