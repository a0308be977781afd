"""Train stage: SFT with LoRA (TRL SFTTrainer + peft) on a dataset -> a new policy.

Run on CPU:   ``python -m pipeline --recipe <recipe> train``
Run on GPUs:  ``accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m pipeline --recipe <recipe> train``
(see docs/training.md).

The dataset is ``train.dataset_id``, or by default the one the dataset stage
builds for the current selection and dataset config (else the newest
version). Its examples are already tokenized with root-only ``labels``, so
TRL uses them as they are: it neither re-tokenizes nor re-masks a dataset
with ``input_ids`` + ``labels`` columns. The LoRA settings and SFTConfig
fields come from the ``train`` section; ``train.extra`` is passed to
SFTConfig verbatim and wins over everything derived here.

Outputs: the adapter + tokenizer under ``<run.dir>/adapters/<train_id>/``
(``adapter_config.json`` + ``adapter_model.safetensors``: what
``PeftModel.from_pretrained`` and vLLM's ``--lora-modules`` load), checkpoints
under its ``checkpoints/``, loss / eval_loss / learning rate per logged step in
``train_logs``, the run in ``train_runs``, and a new policy whose parent is the
policy that sampled most of the training trajectories.

``train_id`` is a hash of the dataset and the training config, so a run that
finished is not repeated (the stage returns ``skipped``) and a run that was
killed resumes from its last checkpoint. Under ``accelerate launch`` only the
main process writes to the warehouse (DuckDB has one writer); every process
reads its plan first, before the main one opens the file for writing.
The logic lives in pipeline.training.plan and pipeline.training.sft.
"""

from __future__ import annotations

from pathlib import Path

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.training.errors import TrainError
from pipeline.training.plan import already_trained, finished_counts, make_plan
from pipeline.training.sft import fit


def run(cfg: PipelineConfig) -> dict:
    from accelerate import PartialState

    state = PartialState()
    # Every process reads its plan, each holding the file only while it reads (db.connect waits for the
    # others); only then does the main process open the warehouse for writing. Other ranks read
    # read-only; the main one read-write, as its query server's connections are (one process may not
    # mix the two).
    if not Path(cfg.run.db_path).exists():
        raise TrainError(f"{cfg.run.db_path}: no warehouse (run the earlier stages first)")
    con = db.connect(
        cfg.run.db_path, read_only=not state.is_main_process, lock_timeout_s=cfg.run.lock_timeout_s
    )
    try:
        plan = make_plan(con, cfg)
    finally:
        con.close()
    state.wait_for_everyone()
    if not state.is_main_process:
        if already_trained(plan):
            return {"skipped": True, "train_id": plan.train_id}
        return fit(cfg, plan, None)

    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        with db.stage_run(con, "train", plan.config_hash) as counts:
            counts.update(finished_counts(con, plan) if already_trained(plan) else fit(cfg, plan, con))
        return counts
    finally:
        con.close()
