"""RL stage: GRPO on the root (TRL GRPOTrainer + LoRA), rollouts = harness episodes, reward = the judge.

Run on CPU:   ``python -m pipeline --recipe <recipe> rl [--policy POLICY_ID] [rl.steps=6]``
(the recipe's ``rl`` section; ``make rl`` runs the embedded default; GPUs:
``pipeline/recipes/production-rl.yaml``, see docs/rl.md).

Starts from ``rl.policy`` (``--policy``; from the command line, by default
the champion, printed). Each step samples ``rl.rollouts_per_step`` episodes
(``rl.num_generations`` per room) through the same harness, sandbox and
subagents as ``sample``, stores each as a trajectory of purpose ``rl`` and
grades it with the reference judge (reward = its headline), then takes one
GRPO step on the root's own tokens. Per step: an ``rl_steps`` row, the
adapter under ``<run.dir>/adapters/<rl_id>/steps/``, a checkpoint (a killed
run resumes at the last finished step). The trained adapter becomes a policy,
evaluated against its start on the held-out rooms (``rl.evaluate``), and the
champion rule decides. The logic lives in pipeline.training.rl and
pipeline.round.run_rl_round.

Several processes: ``accelerate launch --config_file configs/accelerate/multi_gpu.yaml -m
pipeline --recipe <recipe> rl``. The main process holds the warehouse, runs
and writes every rollout, and hands the other processes their plan and their
share of each step's batch; every process takes its share of the update.
"""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta

from pipeline import db, steps
from pipeline.config import PipelineConfig
from pipeline.policies import load_policy
from pipeline.round import run_rl_round
from pipeline.training import rl as grpo

# How long another process waits for the main one at a collective: a whole step's episodes (and, before
# the first, the main process's server start and plan) run in between.
PROCESS_TIMEOUT = timedelta(hours=6)


def run(cfg: PipelineConfig) -> dict:
    import torch
    from accelerate import PartialState

    # On CPU (tests, small machines) the processes talk over gloo, which needs cpu=True from the start.
    state = PartialState(cpu=not torch.cuda.is_available(), timeout=PROCESS_TIMEOUT)
    if not state.is_main_process:
        return grpo.follow()
    with closing(db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)) as con:
        if not cfg.rl.evaluate:
            return steps.rl(con, cfg, cfg.rl.policy).counts
        start = load_policy(con, cfg.rl.policy, field="rl.policy")
        result = run_rl_round(con, cfg, "rl", start)
    print(f"rl round {result.round_id}: {result.decision} ({result.reason})")
    return result.counts()
