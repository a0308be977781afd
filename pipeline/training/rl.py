"""GRPO on the root (TRL GRPOTrainer + LoRA): rollouts are harness episodes on rooms, reward = the judge.

One RL run starts from a named policy (its base model, prompt, harness and
sampling) and trains a LoRA adapter on its root with TRL's GRPOTrainer.
Each training row is a room; TRL hands the rows to ``rollout_func`` repeated
``rl.num_generations`` times, and ``RoomRollouts``
(pipeline.training.room_rollouts) runs each as a real episode through the
project's sampler and harness (same sandbox, subagents and budgets as
``sample``; the subagents stay fixed), writes it to the warehouse as a
trajectory (purpose ``rl``), grades it with the reference judge like any other
trajectory; the reward is the judge's headline. pipeline.training.rollouts
turns each episode into ``prompt_ids`` / ``completion_ids`` / ``env_mask`` /
``logprobs``: the token ids the server sampled are the root's (env_mask 1),
everything between its turns is context (env_mask 0). The loss scores them at
the rollouts' temperature and corrects for the sampler by truncated importance
sampling (pipeline.training.importance); docs/rl.md, "On-policy".

Where rollouts are generated (``rl.generation``):
- ``in_process``: the trainer's own model generates (pipeline.llm.local
  over the live weights): no server, no sync; step s samples from exactly the
  weights after step s-1.
- ``server``: the root's vLLM server generates. After every optimiser step
  the adapter is saved and loaded into the running server as a new LoRA
  module (the step's policy id), and the previous step's module is unloaded
  (adapter-only sync: works on CPU, where TRL's NCCL weight sync cannot).

Bookkeeping: ``rl_runs`` (one row per run), ``rl_steps`` (per optimiser step:
reward mean/std/min/max, share of groups with zero advantage, replacement
groups, failed rollouts, the importance ratio, the weight probe, loss, KL,
grad norm, tokens, rollout/grade/sync/update seconds, and the reward-hacking
watch: memos cut as copied, over-budget memos, reward jumps, rl.watch) and ``rl_rollouts`` (which
trajectory filled which slot of which step). The adapter after step s is
saved under ``<adapter>/steps/step-<s>/`` and registered as the policy that
samples step s+1, so every rollout's ``policy_id`` names the weights that
produced it. A TRL checkpoint is written after every step: a killed run
resumes at the last finished step, and the trajectory ids of a step are
derived from (sampling policy, room, 'rl', step and slot), so the rollouts an
interrupted step already wrote are found again, not sampled twice.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import ConfigError, PipelineConfig
from pipeline.ids import content_hash, stable_id
from pipeline.policies import (
    Policy,
    adapter_weights_hash,
    load_policy,
    register_policy,
)
from pipeline.run_folder import resolve_path, stored_path
from pipeline.stats import bootstrap_mean_ci
from pipeline.training import base_model_path
from pipeline.training.rollouts import make_rollout_func, reward_from_rollout, shared_rollouts
from pipeline.training.room_rollouts import (
    RLError,
    RLPlan,
    RoomRollouts,
    StepStats,
    rollout_sampling,
    step_policy,
)

GENERATION_MODES = ("auto", "in_process", "server")


def config_hash(cfg: PipelineConfig) -> str:
    """What shapes the weights: the rl section (less the start policy and evaluation), the judge budget, the seed."""
    r = asdict(cfg.rl)
    # rl.steps is left out: running again with more steps continues the same run from its last checkpoint.
    # rl.skip_flat_groups and rl.pack_shared_prefix are left out too: they change which passes run
    # and how a pass lays out its tokens, not the update they give (up to float rounding).
    # rl.watch, rl.probe_tolerance and rl.max_redo decide whether a step runs, not what it trains.
    for key in (
        "policy",
        "evaluate",
        "steps",
        "skip_flat_groups",
        "pack_shared_prefix",
        "watch",
        "probe_tolerance",
        "max_redo",
    ):
        r.pop(key, None)
    for key in ("overlap_weight", "cost_weight"):
        if not r.get(key):
            r.pop(key, None)  # off: the hash of a run started before the term existed is unchanged
    return content_hash({"rl": r, "grade_budget": cfg.grade.budget_words, "seed": cfg.run.seed}, length=16)


def generation_mode(cfg: PipelineConfig, start: Policy) -> str:
    mode = cfg.rl.generation
    if mode not in GENERATION_MODES:
        raise ConfigError(f"rl.generation: {mode!r} is not one of {' | '.join(GENERATION_MODES)}")
    if mode == "auto":
        return "server" if start.backend == "openai" else "in_process"
    if mode == "server" and not cfg.models.root.base_url:
        raise ConfigError("rl.generation: server needs models.root.base_url (the root's vLLM server)")
    return mode


def check_config(cfg: PipelineConfig, num_processes: int = 1) -> None:
    r = cfg.rl
    if r.steps < 1 or r.num_generations < 2:
        raise ConfigError("rl.steps must be >= 1 and rl.num_generations >= 2 (a group needs two rollouts)")
    if r.rollouts_per_step % r.num_generations:
        raise ConfigError(
            f"rl.rollouts_per_step ({r.rollouts_per_step}) must be a multiple of rl.num_generations ({r.num_generations})"
        )
    for key in ("coverage_weight", "overlap_weight"):
        if getattr(r, key) < 0:
            raise ConfigError(f"rl.{key} ({getattr(r, key)}) must be >= 0: the term pays for a behaviour")
    if r.cost_weight < 0:
        raise ConfigError(f"rl.cost_weight ({r.cost_weight}) must be >= 0: the term charges for cost")
    if r.top_p != 1.0:
        raise ConfigError(
            f"rl.top_p ({r.top_p}): RL rollouts sample at top-p 1; TRL's loss scores tokens under the full "
            "distribution at the sampling temperature and cannot score a nucleus"
        )
    if r.temperature is not None and not 0 < r.temperature <= 2:
        raise ConfigError(f"rl.temperature ({r.temperature}) must be above 0 and at most 2 (or empty)")
    if r.importance_cap and r.importance_cap < 1:
        raise ConfigError(f"rl.importance_cap ({r.importance_cap}) must be 0 (off) or at least 1")
    if r.max_replacement_groups < 0 or r.max_redo < 0:
        raise ConfigError("rl.max_replacement_groups and rl.max_redo must be >= 0")
    per = r.micro_batch * num_processes
    if r.micro_batch < 1 or r.rollouts_per_step % per:
        raise ConfigError(
            f"rl.rollouts_per_step ({r.rollouts_per_step}) must be a multiple of rl.micro_batch x processes ({per})"
        )


def make_plan(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, start_policy_id: str) -> RLPlan:
    from pipeline.rooms import store

    if not start_policy_id:
        raise RLError(
            "rl.policy is empty: name the policy to start from (--policy) or let the CLI pick the champion"
        )
    start = load_policy(con, start_policy_id, field="rl.policy")
    rooms = list(cfg.rl.rooms) or store.room_names(con, split=cfg.rl.split)
    if not rooms:
        raise RLError(
            f"rl.split: no rooms in split {cfg.rl.split!r}: run `python -m pipeline rooms generate` first"
        )
    chash = config_hash(cfg)
    rl_id = stable_id(start.policy_id, chash, prefix="rl-", sep="\0", length=12)
    row = con.execute("select status from rl_runs where rl_id = ?", [rl_id]).fetchone()
    return RLPlan(
        rl_id=rl_id,
        config_hash=chash,
        start=start,
        generation=generation_mode(cfg, start),
        adapter_dir=str((Path(cfg.run.dir) / "adapters" / rl_id).resolve()),
        rooms=sorted(rooms),
        status=row[0] if row else None,
    )


# --------------------------------------------------------------------------- the trainer


def grpo_config(
    cfg: PipelineConfig, output_dir: str, num_processes: int = 1, sampling: dict[str, Any] | None = None
) -> Any:
    """TRL's GRPOConfig; ``sampling`` is the rollouts' (rollout_sampling): the loss scores tokens at its
    temperature and top-p, the distribution the server sampled them from."""
    import torch
    from trl import GRPOConfig

    r = cfg.rl
    sampling = sampling or {}
    on_gpu = torch.cuda.is_available()
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        "max_steps": r.steps,
        "learning_rate": r.learning_rate,
        "per_device_train_batch_size": r.micro_batch,
        # One generation batch (rl.rollouts_per_step rollouts) per optimiser step.
        "gradient_accumulation_steps": r.rollouts_per_step // (r.micro_batch * num_processes),
        "num_generations": r.num_generations,
        "beta": r.beta,
        "loss_type": r.loss_type,
        "max_completion_length": r.max_length,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 1,  # a killed run resumes at the last finished step
        "report_to": "none",
        "seed": cfg.run.seed,
        "data_seed": cfg.run.seed,
        "use_cpu": not on_gpu,
        "bf16": on_gpu and torch.cuda.is_bf16_supported(),
        "gradient_checkpointing": r.gradient_checkpointing,
        "disable_tqdm": True,
        "use_vllm": False,  # rollouts come from rollout_func; the server is synced by adapter, not NCCL
        "temperature": float(sampling.get("temperature", cfg.sampling.temperature)),
        "top_p": float(sampling.get("top_p", r.top_p)),
        # Truncated importance sampling against the sampler's log-probabilities (pipeline.training.importance).
        "vllm_importance_sampling_correction": r.importance_cap > 0,
        "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_clip_max": r.importance_cap or 3.0,
    }
    kwargs.update(r.extra)
    try:
        return GRPOConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"rl: {exc}") from exc


def _room_rows(rooms: list[str], per_step: int) -> list[dict[str, str]]:
    # TRL's sampler drops an incomplete batch of prompts: repeat the rooms until one step's worth fits.
    rows = list(rooms)
    while len(rows) < per_step:
        rows += rooms
    return [{"prompt": r} for r in rows]


class _StepRecorder:
    """TrainerCallback: per step, the adapter saved (and served), and an ``rl_steps`` row."""

    def __init__(self, con, cfg: PipelineConfig, plan: RLPlan, runner: RoomRollouts) -> None:
        self.con, self.cfg, self.plan, self.runner = con, cfg, plan, runner
        self.trainer: Any = None  # set once the trainer exists: how many rollouts its update left out
        self.stopped: str | None = None  # the watch flag that stopped the run (rl.watch.stop)

    def callback(self) -> Any:
        from transformers import TrainerCallback

        rec = self

        class RLSteps(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                rec.step_end(state, model)

            def on_log(self, args, state, control, logs=None, **kwargs):
                rec.log(state, logs or {}, control)

        return RLSteps()

    def step_end(self, state: Any, model: Any) -> None:
        stats = self.runner.pending
        if stats is None:
            return
        stats.logs["update_s"] = time.monotonic() - stats.rollout_ended
        if getattr(self.trainer, "skip_reason", "off") is None:
            stats.n_skipped = self.trainer.skipped_in_step
        if getattr(self.trainer, "pack_reason", "off") is None:
            stats.update_tokens = self.trainer.packed_tokens
        stats.logs.update(
            {k: v for k, v in self.trainer.ratio_stats.row().items() if v is not None}
            if hasattr(self.trainer, "ratio_stats")
            else {}
        )
        t0 = time.monotonic()
        step = state.global_step
        folder = Path(self.plan.adapter_dir) / "steps" / f"step-{step}"
        model.save_pretrained(str(folder))
        from pipeline.serving import merges_adapters

        # under merged weights the next step's sampling loads them (pipeline.policies.serve_policy)
        if self.plan.generation == "server" and step < self.cfg.rl.steps and not merges_adapters(self.cfg):
            from pipeline.llm.lora_modules import ensure_lora_module, unload_lora_module

            url = self.cfg.models.root.base_url
            nxt = step_policy(self.cfg, self.plan, step + 1)
            ensure_lora_module(url, nxt.lora_module, resolve_path(self.cfg.run.dir, nxt.adapter).resolve())
            prev = step_policy(self.cfg, self.plan, step)
            if prev.lora_module and prev.policy_id != self.plan.start.policy_id:
                unload_lora_module(url, prev.lora_module)
        stats.sync_s = time.monotonic() - t0

    def watch(self, stats: StepStats, reward_mean: float | None) -> list[str]:
        """The reward-hacking watch's flags for one step (rl.watch); empty when none."""
        w = self.cfg.rl.watch
        n = max(1, stats.n_rollouts)
        flags = []
        if stats.n_copied / n > w.max_copied_share:
            flags.append(f"copied memos {stats.n_copied}/{n} > {w.max_copied_share:g}")
        if stats.n_over_budget / n > w.max_over_budget_share:
            flags.append(f"over-budget memos {stats.n_over_budget}/{n} > {w.max_over_budget_share:g}")
        prev = self.con.execute(
            "select reward_mean from rl_steps where rl_id = ? and step = ?", [self.plan.rl_id, stats.step - 1]
        ).fetchone()
        if (
            reward_mean is not None
            and prev
            and prev[0] is not None
            and reward_mean - prev[0] > w.max_reward_jump
        ):
            flags.append(f"reward jump {reward_mean - prev[0]:+.3f} > {w.max_reward_jump:g}")
        return flags

    def log(self, state: Any, logs: dict[str, Any], control: Any = None) -> None:
        stats = self.runner.pending
        if stats is None or "loss" not in logs or stats.step != state.global_step:
            return
        r = stats.rewards
        # The printed and stored interval of the step's mean reward: a bootstrap over its rollouts (the
        # rollouts of one room share a prompt, so with few rooms it understates the spread across rooms).
        _, ci_low, ci_high = bootstrap_mean_ci(r, seed=stats.step) if r else (None, None, None)
        row = {
            "rl_id": self.plan.rl_id,
            "step": stats.step,
            "sampling_policy_id": stats.sampling_policy_id,
            "n_rollouts": stats.n_rollouts or len(r),
            "reward_mean": statistics.fmean(r) if r else None,
            "reward_std": statistics.pstdev(r) if len(r) > 1 else 0.0,
            "reward_min": min(r) if r else None,
            "reward_max": max(r) if r else None,
            "reward_ci_low": ci_low,
            "reward_ci_high": ci_high,
            "zero_advantage_share": stats.zero_advantage_share,
            "loss": logs.get("loss"),
            "kl": logs.get("kl") if self.cfg.rl.beta > 0 else None,
            "grad_norm": logs.get("grad_norm"),
            "tokens": stats.tokens,
            "trained_tokens": stats.trained_tokens,
            "n_copied": stats.n_copied,
            "n_over_budget": stats.n_over_budget,
            "rollout_s": stats.rollout_s,
            "grade_s": stats.grade_s,
            "sync_s": stats.sync_s,
            "update_s": stats.logs.get("update_s"),
            "n_skipped": stats.n_skipped,
            "update_tokens": stats.update_tokens,
            "ratio_mean": stats.logs.get("ratio_mean"),
            "ratio_max": stats.logs.get("ratio_max"),
            "ratio_clipped_share": stats.logs.get("ratio_clipped_share"),
            "n_failed": stats.n_failed,
            "n_redone": stats.n_redone,
            "n_replacement_groups": stats.n_replacement_groups,
            "n_replaced": stats.n_replaced,
            "probe_logprob_diff": stats.probe_diff,
            "finished_at": db.now(),
        }
        flags = self.watch(stats, row["reward_mean"])
        row["watch"] = "; ".join(flags)
        with db.transaction(self.con):
            # A step redone after a kill (its checkpoint was not written) replaces its row.
            self.con.execute(
                "delete from rl_steps where rl_id = ? and step = ?", [self.plan.rl_id, stats.step]
            )
            db.write_rows(self.con, "rl_steps", [row])
        band = f" [95% CI {ci_low:.3f}, {ci_high:.3f}]" if r else ""
        skipped = f" ({stats.n_skipped} flat-group rollouts left out)" if stats.n_skipped else ""
        ran = f" over {stats.update_tokens} tokens" if stats.update_tokens is not None else ""
        mean = f"{row['reward_mean']:.3f}" if r else "n/a"
        failed = (
            f", {stats.n_failed} failed ({stats.n_redone} redone)" if stats.n_failed or stats.n_redone else ""
        )
        ratio = (
            f"ratio mean {row['ratio_mean']:.3f} max {row['ratio_max']:.2f} clipped {row['ratio_clipped_share']:.1%}"
            if row["ratio_mean"] is not None
            else "ratio n/a"
        )
        probe = f", probe {stats.probe_diff:.3f}" if stats.probe_diff is not None else ""
        print(
            f"rl step {stats.step}: reward {mean}{band} (sd {row['reward_std']:.3f}, {row['n_rollouts']} rollouts"
            f"{failed}), flat groups {stats.zero_advantage_share:.0%} of {stats.groups} "
            f"(replacements drawn {stats.n_replacement_groups}, used {stats.n_replaced}), {ratio}{probe}, "
            f"watch {row['watch'] or 'ok'}; rollout {stats.rollout_s:.1f}s grade {stats.grade_s:.1f}s "
            f"sync {stats.sync_s:.1f}s update {row['update_s']:.1f}s{ran}{skipped}",
            flush=True,
        )
        self.runner.pending = None
        if flags and self.cfg.rl.watch.stop and control is not None:
            self.stopped = f"step {stats.step}: {row['watch']}"
            control.should_training_stop = True


def _mark_running(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: RLPlan) -> None:
    if plan.status is None:
        db.write_rows(
            con,
            "rl_runs",
            [
                {
                    "rl_id": plan.rl_id,
                    "start_policy_id": plan.start.policy_id,
                    "config_hash": plan.config_hash,
                    "generation": plan.generation,
                    "adapter_path": stored_path(cfg.run.dir, plan.adapter_dir),
                    "status": "running",
                    "started_at": db.now(),
                }
            ],
        )
    else:
        con.execute("update rl_runs set status = 'running', ended_at = null where rl_id = ?", [plan.rl_id])


def start_model(cfg: PipelineConfig, start: Policy, model: Any) -> tuple[Any, Any]:
    """(model, peft_config) for GRPOTrainer from the start policy's weights.

    A base policy gets a fresh LoRA from the ``train`` section, as SFT would. A policy with an adapter
    (an SFT champion) goes on training that adapter: RL continues where SFT stopped, and every step's
    adapter is still a LoRA on the same base model, so vLLM serves it as a module like any other.
    """
    from peft import PeftModel

    from pipeline.training.sft import lora_config

    if not start.adapter:
        return model, lora_config(cfg)
    folder = resolve_path(cfg.run.dir, start.adapter)
    if not (folder / "adapter_config.json").exists():
        raise RLError(
            f"rl.policy: {start.policy_id}'s adapter folder {start.adapter} has no adapter_config.json"
        )
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True), None


def fit(con: duckdb.DuckDBPyConnection | None, cfg: PipelineConfig, plan: RLPlan) -> dict[str, Any]:
    """GRPO from the plan's start policy (or resume it); returns counts with the new policy id."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_utils import get_last_checkpoint

    from pipeline.training.shared_prefix import trainer_class

    state = PartialState()
    # Under accelerate launch the main process holds the warehouse (``con``) and runs every process's
    # rollouts (pipeline.training.rollouts.shared_rollouts); the others are given ``con=None`` and the
    # main process's plan (``follow``), and take their share of each update.
    main = state.is_main_process
    if main != (con is not None):
        raise RuntimeError("rl: the main process fits with the warehouse, the other processes without it")
    check_config(cfg, state.num_processes)
    if plan.start.harness != "rlm":
        raise RLError(
            f"rl.policy: {plan.start.policy_id} runs the {plan.start.harness!r} harness; RL trains the RLM root"
        )
    if not torch.cuda.is_available():
        from pipeline.llm.local import sensible_threads

        torch.set_num_threads(max(1, sensible_threads() // state.num_processes))
    ckpt_dir = Path(plan.adapter_dir) / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    if main:
        _mark_running(con, cfg, plan)
    try:
        base = base_model_path(plan.start.base_model, cfg.serve.models)
        tokenizer = AutoTokenizer.from_pretrained(base)
        args = grpo_config(cfg, str(ckpt_dir), state.num_processes, rollout_sampling(cfg, plan.start))
        model, peft_config = start_model(
            cfg,
            plan.start,
            AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16 if args.bf16 else torch.float32),
        )
        runner = callbacks = recorder = None
        received: list[int] = []  # rollouts this process trained on, per step
        if main:
            # The left-padded copy of the tokenizer is the one in-process generation uses.
            runner = RoomRollouts(con, cfg, plan, AutoTokenizer.from_pretrained(base))
            recorder = _StepRecorder(con, cfg, plan, runner)
            callbacks = [recorder.callback()]
        shared = shared_rollouts(_counted(runner, tokenizer, cfg.rl.max_length) if main else None)

        def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            out = shared(prompts, trainer)
            received.append(len(out["completion_ids"]))
            return out

        trainer_cls = trainer_class(cfg.rl.pack_shared_prefix, cfg.rl.skip_flat_groups)
        trainer = trainer_cls(
            importance_cap=cfg.rl.importance_cap,
            model=model,
            reward_funcs=[reward_from_rollout],
            args=args,
            train_dataset=Dataset.from_list(
                _room_rows(plan.rooms, cfg.rl.rollouts_per_step // cfg.rl.num_generations)
            ),
            processing_class=tokenizer,
            peft_config=peft_config,
            rollout_func=rollout_func,
            callbacks=callbacks,
        )
        if recorder is not None:
            recorder.trainer = trainer
        if main and getattr(trainer, "skip_reason", None):
            print(f"rl: every rollout goes through the update ({trainer.skip_reason})", flush=True)
        if main and getattr(trainer, "pack_reason", None):
            print(f"rl: micro-batches run padded, as TRL runs them ({trainer.pack_reason})", flush=True)
        resume = get_last_checkpoint(str(ckpt_dir))
        t0 = time.monotonic()
        trainer.train(resume_from_checkpoint=resume)
        seconds = time.monotonic() - t0
        trainer.save_model(plan.adapter_dir)
        if main:
            tokenizer.save_pretrained(plan.adapter_dir)
    except BaseException:
        if main:
            con.execute(
                "update rl_runs set status = 'failed', ended_at = ? where rl_id = ?", [db.now(), plan.rl_id]
            )
        raise
    if not main:
        return {
            "rl_id": plan.rl_id,
            "process": state.process_index,
            "backend": str(torch.distributed.get_backend()),
            "steps": trainer.state.global_step,
            "rollouts_trained": sum(received),
            "seconds": round(seconds, 2),
        }
    return _record_policy(con, cfg, plan, seconds, resume, recorder.stopped)


def _counted(runner: RoomRollouts, tokenizer: Any, max_length: int) -> Any:
    """The rooms' rollout_func, noting the step's token counts and when its rollouts ended."""
    inner = make_rollout_func(runner, tokenizer, max_length)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = inner(prompts, trainer)
        stats = runner.pending
        if stats is not None:
            stats.tokens = sum(
                len(p) + len(c) for p, c in zip(out["prompt_ids"], out["completion_ids"], strict=True)
            )
            stats.trained_tokens = sum(sum(m) for m in out["env_mask"])
            stats.rollout_ended = time.monotonic()
        return out

    return rollout_func


# --------------------------------------------------------------------------- several processes


def lead(cfg: PipelineConfig, plan: RLPlan | None) -> None:
    """The main process of a multi-process launch tells the others what to train (None: nothing).

    Called once per rl command on every path the main process takes, so the others never wait for
    a plan that does not come (an error ends the launch: torchrun stops the other processes).
    """
    from accelerate import PartialState

    if PartialState().num_processes > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list([(cfg, plan)], from_process=0)


def follow() -> dict[str, Any]:
    """Any other process of a multi-process launch: fit the main process's plan with its config."""
    from accelerate.utils import broadcast_object_list

    box: list[Any] = [None]
    broadcast_object_list(box, from_process=0)
    cfg, plan = box[0]
    if plan is None:
        return {"skipped": True}
    return fit(None, cfg, plan)


def _record_policy(
    con: duckdb.DuckDBPyConnection,
    cfg: PipelineConfig,
    plan: RLPlan,
    seconds: float,
    resume: str | None,
    stopped: str | None = None,
) -> dict[str, Any]:
    # The trained policy samples as its start did (the rollouts' top-p and temperature are the loss's business), and names
    # its weights, so its LoRA module is never another run's.
    policy = dataclasses.replace(
        plan.start,
        adapter=stored_path(cfg.run.dir, plan.adapter_dir),
        parent_id=plan.start.policy_id,
        train_id=plan.rl_id,
        weights=adapter_weights_hash(plan.adapter_dir),
    )
    (Path(plan.adapter_dir) / "rl_run.json").write_text(
        json.dumps(
            {
                "rl_id": plan.rl_id,
                "start_policy_id": plan.start.policy_id,
                "policy_id": policy.policy_id,
                "config_hash": plan.config_hash,
                "generation": plan.generation,
                "rl": asdict(cfg.rl),
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    with db.transaction(con):
        pid = register_policy(con, policy)
        con.execute(
            "update rl_runs set policy_id = ?, status = ?, ended_at = ? where rl_id = ?",
            [pid, "stopped" if stopped else "ok", db.now(), plan.rl_id],
        )
    if stopped:
        print(
            f"rl: the watch stopped the run after {stopped} (rl.watch.stop); its adapter is kept", flush=True
        )
    return finished_counts(con, plan) | {
        "stopped": stopped,
        "skipped": False,
        "seconds": round(seconds, 2),
        "resumed_from": resume and stored_path(cfg.run.dir, resume),
    }


def finished_steps(con: duckdb.DuckDBPyConnection, plan: RLPlan) -> int:
    return con.execute("select count(*) from rl_steps where rl_id = ?", [plan.rl_id]).fetchone()[0]


def already_trained(con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, plan: RLPlan) -> bool:
    """The run finished rl.steps steps and its adapter is on disk: nothing to do."""
    from pipeline.training.plan import adapter_complete

    return (
        plan.status == "ok"
        and adapter_complete(plan.adapter_dir)
        and finished_steps(con, plan) >= cfg.rl.steps
    )


def finished_counts(con: duckdb.DuckDBPyConnection, plan: RLPlan) -> dict[str, Any]:
    run = db.fetch_dicts(con, "select * from rl_runs where rl_id = ?", [plan.rl_id])[0]
    steps = db.fetch_dicts(
        con,
        "select step, reward_mean, reward_std, n_rollouts from rl_steps where rl_id = ? order by step",
        [plan.rl_id],
    )
    n_rollouts = con.execute("select count(*) from rl_rollouts where rl_id = ?", [plan.rl_id]).fetchone()[0]
    return {
        "skipped": True,
        "rl_id": plan.rl_id,
        "start_policy_id": plan.start.policy_id,
        "policy_id": run["policy_id"],
        "generation": plan.generation,
        "adapter_path": run["adapter_path"],
        "steps": len(steps),
        "rollouts": n_rollouts,
        "reward_per_step": [round(s["reward_mean"], 4) for s in steps if s["reward_mean"] is not None],
    }
