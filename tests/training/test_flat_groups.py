"""Leaving flat GRPO groups out of the update: the same weights, fewer passes through the model.

Real TRL GRPOTrainer, real SmolLM2-135M with LoRA. One optimiser step on two
groups of two rollouts, one group with a reward spread and one flat, is run by
plain GRPOTrainer and by FlatGroupSkipping from the same start: the LoRA
weights after the step are equal, and the skipping trainer ran the model on
the two rollouts of the group with a spread only.
"""

from __future__ import annotations

import math

import pytest

from pipeline.training.rollouts import Episode
from tests.training.grpo_step import one_step

# Exact binary fractions, so TRL's group mean of a flat group is exact and its advantage is exactly 0
# without this module's help: the two trainers are then comparable bit for bit.
REWARDS = {"a": [1.0, 0.0], "b": [0.5, 0.5]}


def test_flat_rollouts_marks_whole_groups():
    from pipeline.training.flat_groups import flat_rollouts

    nan = math.nan
    assert flat_rollouts([1.0, 0.0, 0.5, 0.5], 2) == [False, False, True, True]
    # An unscored rollout is left out of its group's comparison, as TRL leaves it out of the mean.
    assert flat_rollouts([0.3, nan, 0.3, 0.3, 0.1, 0.2], 3) == [True, True, True, False, False, False]
    assert flat_rollouts([nan, nan], 2) == [True, True]
    assert flat_rollouts([0.25, 0.25 + 1e-9], 2) == [False, False]


def _fixed_runner(prompts, trainer):
    seen: dict[str, int] = {}
    episodes = []
    for p in prompts:
        i = seen[p] = seen.get(p, -1) + 1
        messages = [
            {"role": "user", "content": f"Summarise clause {p}."},
            {"role": "assistant", "content": f"Clause {p}, reading {i}: the buyer may terminate on notice."},
        ]
        episodes.append(Episode(messages, REWARDS[p][i]))
    return episodes


@pytest.mark.slow
def test_skipping_flat_groups_gives_the_same_update_with_fewer_passes(smollm2_path, tmp_path):
    import torch
    from trl import GRPOTrainer

    from pipeline.training.flat_groups import FlatGroupSkipping

    def step(cls, name):
        # Plain SGD: Adam's first step moves every weight by about the learning rate whatever the gradient's
        # scale, so a skipped pass that scaled the gradient wrongly would go unseen under it.
        return one_step(cls, smollm2_path, tmp_path / name, _fixed_runner, ["a", "b"], group=2, optim="sgd")

    plain, plain_before, plain_after, plain_passes = step(GRPOTrainer, "plain")
    skip, skip_before, skip_after, skip_passes = step(FlatGroupSkipping, "skip")

    assert skip.skip_reason is None
    assert plain_before.keys() == skip_before.keys() and plain_before
    assert all(torch.equal(plain_before[n], skip_before[n]) for n in plain_before)  # the same start
    # The step moved the weights (the group with a spread has a gradient) ...
    assert any(not torch.equal(plain_before[n], plain_after[n]) for n in plain_before)
    # ... and both trainers moved them to the same place.
    for n in plain_after:
        assert torch.allclose(plain_after[n], skip_after[n], rtol=0, atol=1e-7), n
    # Plain TRL ran all 4 rollouts through the model; skipping ran the 2 of group "a" only.
    assert plain_passes == 4
    assert skip_passes == 2
    assert skip.skipped_in_step == 2


def test_skipping_is_off_where_the_zero_gradient_is_not_guaranteed():
    from types import SimpleNamespace

    from pipeline.training.flat_groups import FlatGroupSkipping

    def reason(**kw):
        fake = SimpleNamespace(
            accelerator=SimpleNamespace(num_processes=kw.get("processes", 1)),
            beta=kw.get("beta", 0.0),
            _entropy_bonus_enabled=kw.get("entropy", False),
            aux_loss_enabled=False,
            multi_objective_aggregation="sum_then_normalize",
        )
        return FlatGroupSkipping._why_not_skip(fake)

    assert reason() is None
    assert "several processes" in reason(processes=2)
    assert "beta" in reason(beta=0.04)
    assert "entropy" in reason(entropy=True)
