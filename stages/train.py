"""Train stage: SFT with LoRA (TRL SFTTrainer + peft) on a dataset -> a new policy.

Run on CPU:   ``python -m pipeline --recipe <recipe> train``
Run on GPUs:  ``accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m pipeline --recipe <recipe> train``
(see docs/training.md).

The dataset is ``train.dataset_id`` (``--dataset``; from the command line, by
default the newest dataset run's dataset, printed). Its examples are already tokenized with root-only ``labels``, so
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

from contextlib import closing
from pathlib import Path

from pipeline import db, steps
from pipeline.config import PipelineConfig
from pipeline.training.errors import TrainError
from pipeline.training.plan import already_trained
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
    read_only = not state.is_main_process
    with closing(
        db.connect(cfg.run.db_path, read_only=read_only, lock_timeout_s=cfg.run.lock_timeout_s)
    ) as con:
        plan = steps.plan_training(con, cfg, cfg.train.dataset_id)
    state.wait_for_everyone()
    if not state.is_main_process:
        if already_trained(plan):
            return {"skipped": True, "train_id": plan.train_id}
        return fit(cfg, plan, None)

    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        return steps.train(con, cfg, plan).counts
