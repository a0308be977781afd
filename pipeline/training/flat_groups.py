"""GRPO that spends no forward/backward pass on rollouts whose gradient is exactly zero.

A GRPO group whose rollouts all earned the same reward gives every member the
advantage 0. With ``beta = 0`` (no KL term), no entropy bonus and no
auxiliary loss, every TRL 1.16 loss type (dapo, grpo, dr_grpo, bnpo, cispo,
sapo, vespo, luspo) is a per-token term multiplied by the advantage, so such
a rollout contributes exactly zero gradient. TRL still runs its forward and
backward pass, which on CPU is most of a step (measured in docs/rl.md: a
step whose groups were all flat took 118 s of update for no change).

``FlatGroupSkipping`` is GRPOTrainer with two changes, both exact:
- the advantages of a flat group are set to exactly 0 (TRL computes them as
  ``(r - mean) / (std + 1e-4)``, which float rounding can leave at ~1e-4
  instead of 0);
- a micro-batch whose advantages are all 0 is not run through the model: its
  loss is ``0 x (the trainable weights' sum)``, which gives every trainable
  weight the zero gradient the full pass would have given it, so gradient
  accumulation, clipping and the optimiser step are unchanged.

The flat rollouts stay in the step: their tokens still count in the DAPO
normaliser (``num_items_in_batch`` is computed before), so the step's update
equals TRL's with exact zeros for flat groups (tests/training/test_flat_groups.py
compares the weights after a step with and without skipping; with
``train.lora_dropout > 0`` the passes that run draw other dropout masks, from
the same distribution). This is the saving of DAPO's dynamic sampling without
its resampling: the step computes fewer rollouts, not different ones.

It skips only where the zero is guaranteed and safe: one process (under DDP
every process must run the same passes), ``beta == 0``, no entropy bonus, no
auxiliary loss, and TRL's default ``sum_then_normalize`` reward aggregation.
Elsewhere it is GRPOTrainer unchanged, and ``skip_reason`` says why.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from trl import GRPOTrainer


def flat_rollouts(rewards: list[float], group: int) -> list[bool]:
    """Per rollout: is it in a group (consecutive ``group`` rollouts) whose scored rewards are all equal?

    Unscored rollouts (NaN) are left out of the comparison, as TRL leaves them out of the group mean
    (and gives them advantage 0); a group with no scored rollout is flat.
    """
    flags: list[bool] = []
    for i in range(0, len(rewards), group):
        members = rewards[i : i + group]
        scored = [r for r in members if not math.isnan(r)]
        flags += [not scored or max(scored) == min(scored)] * len(members)
    return flags


class FlatGroupSkipping(GRPOTrainer):
    """GRPOTrainer that leaves out the forward/backward pass of micro-batches with zero advantage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.skip_reason = self._why_not_skip()
        self.skipped_in_step = 0  # rollouts left out of the current optimiser step's passes
        self._last_rewards: torch.Tensor | None = None

    def _why_not_skip(self) -> str | None:
        if self.accelerator.num_processes != 1:
            return "several processes (every process must run the same passes)"
        if self.beta != 0.0:
            return "beta > 0 (the KL term has a gradient at advantage 0)"
        if getattr(self, "_entropy_bonus_enabled", False):
            return "an entropy bonus (it has a gradient at advantage 0)"
        if getattr(self, "aux_loss_enabled", False):
            return "an auxiliary loss"
        if self.multi_objective_aggregation != "sum_then_normalize":
            return f"multi_objective_aggregation={self.multi_objective_aggregation}"
        return None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.skip_reason is None and self.model.training and self._last_rewards is not None:
            # The reward TRL normalises: the weighted sum over reward functions, NaN where none scored.
            per_func = self._last_rewards
            rewards = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
            rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
            flat = flat_rollouts(rewards.tolist(), self.num_generations)
            advantages = out["advantages"]
            advantages[torch.tensor(flat, device=advantages.device)] = 0.0
            self.skipped_in_step = 0
        return out

    def _compute_loss(self, model, inputs):
        if self.skip_reason is None and self.model.training and not torch.any(inputs["advantages"] != 0):
            self.skipped_in_step += len(inputs["advantages"])
            weights = [p for p in model.parameters() if p.requires_grad]
            return torch.stack([p.sum() for p in weights]).sum() * 0.0
        return super()._compute_loss(model, inputs)
