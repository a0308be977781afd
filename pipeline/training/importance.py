"""GRPO corrected for the sampler: truncated importance sampling against the server's log-probabilities.

The root's rollouts are sampled by vLLM (bfloat16 on most CPUs) and scored by
the trainer (float32): the two give the same tokens somewhat different
probabilities, so the loss is off-policy by that much. TRL 1.16 corrects for
it (truncated importance sampling, TIS) only when it generates with vLLM
itself (``use_vllm``); rollouts that come from ``rollout_func`` get the
sampler's log-probabilities stored as ``sampling_per_token_logps`` and no
correction.

``SamplerCorrection`` is GRPOTrainer with the correction for those rollouts.
Each token's loss is multiplied by ``min(p_trainer / p_sampler, cap)``
(``rl.importance_cap``), the ratio taken from the log-probabilities the loss
pass itself computes, detached: with one optimiser step per generation batch
the weights of that pass are the weights that were serving (TRL's own
``old_per_token_logps`` would run the whole batch through the model once
more to get the same numbers). Tokens without a sampler log-probability
(NaN: a rollout re-tokenized from text) get ratio 1. TRL applies the ratio
in its loss under ``use_vllm``; the flag is raised for the loss pass only,
so nothing else of TRL's vLLM path runs.

Per optimiser step it keeps the ratio's mean, max and the share of tokens
clipped at the cap (before clipping), over the root's tokens, for ``rl_steps``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from trl import GRPOTrainer


class RatioStats:
    """The importance ratios of one optimiser step's root tokens (before the cap)."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self.max = 0.0
        self.clipped = 0

    def add(self, ratio: torch.Tensor, cap: float) -> None:
        if ratio.numel() == 0:
            return
        self.n += ratio.numel()
        self.total += float(ratio.sum())
        self.max = max(self.max, float(ratio.max()))
        self.clipped += int((ratio > cap).sum())

    def row(self) -> dict[str, float | None]:
        if not self.n:
            return {"ratio_mean": None, "ratio_max": None, "ratio_clipped_share": None}
        return {
            "ratio_mean": self.total / self.n,
            "ratio_max": self.max,
            "ratio_clipped_share": self.clipped / self.n,
        }


def truncated_ratio(
    trainer_logps: torch.Tensor, sampler_logps: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the capped ratio per token, the uncapped ratios of the masked tokens that had a sampler value)."""
    diff = (trainer_logps.detach() - sampler_logps) * mask
    known = ~torch.isnan(diff)
    ratio = torch.exp(torch.nan_to_num(diff, nan=0.0))
    raw = ratio[mask.bool() & known]
    return torch.clamp(ratio, max=cap), raw


class SamplerCorrection(GRPOTrainer):
    """GRPOTrainer with truncated importance sampling for rollouts that carry sampler log-probabilities."""

    def __init__(self, *args: Any, importance_cap: float = 2.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.importance_cap = float(importance_cap)
        self.ratio_stats = RatioStats()
        self._loss_inputs: dict[str, Any] | None = None

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.ratio_stats = RatioStats()  # a new generation batch: a new optimiser step
        return out

    def _compute_loss(self, model, inputs):
        correcting = (
            self.importance_cap > 0
            and not math.isinf(self.importance_cap)
            and inputs.get("sampling_per_token_logps") is not None
        )
        self._loss_inputs = inputs if correcting else None
        self.use_vllm = correcting  # TRL multiplies in inputs["importance_sampling_ratio"] only then
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.use_vllm = False
            self._loss_inputs = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        out = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *a, **kw
        )
        inputs = self._loss_inputs
        if inputs is not None and "importance_sampling_ratio" not in inputs:
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs:
                mask = mask * inputs["tool_mask"]
            ratio, raw = truncated_ratio(
                out[0], inputs["sampling_per_token_logps"], mask, self.importance_cap
            )
            inputs["importance_sampling_ratio"] = ratio
            if self.model.training:
                self.ratio_stats.add(raw, self.importance_cap)
        return out
