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

from pipeline.training.rollouts import Episode, make_rollout_func, reward_from_rollout

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


def _one_step(trainer_cls, smollm2_path, out_dir):
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=str(out_dir),
        max_steps=1,
        learning_rate=1e-2,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=4,  # one generation batch of 2 rooms x 2 rollouts per step
        num_generations=2,
        max_completion_length=64,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=0,
        data_seed=0,
        disable_tqdm=True,
    )
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer = trainer_cls(
        model=model,
        reward_funcs=[reward_from_rollout],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "a"}, {"prompt": "b"}]),
        processing_class=tokenizer,
        peft_config=lora,
        rollout_func=make_rollout_func(_fixed_runner, tokenizer, max_length=512),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    passes = []
    hook = trainer.model.register_forward_hook(lambda module, args, output: passes.append(1))
    trainer.train()
    hook.remove()
    after = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return trainer, before, after, len(passes)


@pytest.mark.slow
def test_skipping_flat_groups_gives_the_same_update_with_fewer_passes(smollm2_path, tmp_path):
    import torch
    from trl import GRPOTrainer

    from pipeline.training.flat_groups import FlatGroupSkipping

    plain, plain_before, plain_after, plain_passes = _one_step(GRPOTrainer, smollm2_path, tmp_path / "plain")
    skip, skip_before, skip_after, skip_passes = _one_step(FlatGroupSkipping, smollm2_path, tmp_path / "skip")

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
