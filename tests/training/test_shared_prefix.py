"""Packing a micro-batch as a tree (shared prompt once, no padding): the same log-probs, the same update.

The layout is checked token by token: every scored completion token, in the
packed sequence, sees exactly the tokens (and positions) it saw in its own
padded row. Then real TRL GRPOTrainer on real SmolLM2-135M with LoRA: one
optimiser step (plain SGD, so the update is the gradient) by plain
GRPOTrainer at one rollout per pass, and by SharedPrefixPacking with a group
or the whole batch per pass, from the same start; the steps agree to float
rounding and the packed trainer ran fewer passes over fewer tokens.
"""

from __future__ import annotations

import pytest
import torch

from pipeline.training.rollouts import Episode
from pipeline.training.shared_prefix import group_by_prompt, pack, prompt_order, tree_attention
from tests.training.grpo_step import one_step

PAD = 0


def _batch(prompts: list[list[int]], completions: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """TRL's layout: prompts left-padded, completions right-padded, concatenated."""
    p_w, c_w = max(map(len, prompts)), max(map(len, completions))
    ids = torch.full((len(prompts), p_w + c_w), PAD)
    mask = torch.zeros_like(ids)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, p_w - len(p) : p_w], mask[i, p_w - len(p) : p_w] = torch.tensor(p), 1
        ids[i, p_w : p_w + len(c)], mask[i, p_w : p_w + len(c)] = torch.tensor(c), 1
    return ids, mask, c_w


def test_every_scored_token_sees_its_own_row_and_nothing_else():
    prompts = [[5, 6, 7, 8, 9], [5, 6, 7, 8, 9], [5, 6, 7, 3], [5, 6, 7, 8, 9]]
    completions = [[11, 12, 13], [21], [31, 32], []]
    ids, mask, keep = _batch(prompts, completions)
    packs = pack(ids, mask, keep, max_tokens=100)
    assert packs is not None and len(packs) == 1
    packed = packs[0]
    # The trunk is the common prompt [5, 6, 7], cut one short of the shortest prompt (4 tokens).
    assert packed.tree.trunk == 3
    assert packed.length == 3 + (2 + 3) + (2 + 1) + (1 + 2) + 2  # trunk + each branch, no padding
    allowed = packed.allowed()
    scored = list(zip(packed.rows.tolist(), packed.cols.tolist(), packed.sources.tolist(), strict=True))
    assert sorted((r, c) for r, c, _ in scored) == [
        (r, c) for r, comp in enumerate(completions) for c in range(len(comp))
    ]
    for row, col, src in scored:
        own = prompts[row] + completions[row][:col]  # what predicted this token in the row itself
        seen = [
            (int(packed.input_ids[k]), int(packed.position_ids[k]))
            for k in range(packed.length)
            if allowed[src, k]
        ]
        assert seen == [(t, pos) for pos, t in enumerate(own)], (row, col)
        assert int(packed.shift_labels[src]) == completions[row][col]
    # Nothing else is scored.
    assert int((packed.shift_labels != -100).sum()) == sum(map(len, completions))


def test_no_shared_prompt_still_drops_the_padding():
    ids, mask, keep = _batch([[1, 2], [3, 4, 5, 6]], [[7], [8, 9, 10]])
    (packed,) = pack(ids, mask, keep, max_tokens=100)
    assert packed.tree.trunk == 0
    assert packed.length == 3 + 7
    assert not packed.allowed()[3:, :3].any()  # the second row never sees the first


def test_a_pass_stays_within_max_tokens():
    prompts = [[5, 6, 7, 8]] * 4
    completions = [[1] * 6, [2] * 6, [3] * 6, [4] * 20]
    ids, mask, keep = _batch(prompts, completions)
    packs = pack(ids, mask, keep, max_tokens=20)
    # trunk 3, each branch 1 + its completion: 3 + 7 + 7 = 17 fits, a third branch would not; the
    # long row (3 + 21 = 24) goes alone, past the bound only as far as it must.
    assert [p.length for p in packs] == [17, 10, 24]
    assert sorted(int(r) for p in packs for r in p.rows.unique()) == [0, 1, 2, 3]


def test_a_mask_with_a_hole_is_not_packed():
    ids, mask, keep = _batch([[1, 2, 3]], [[4, 5, 6]])
    mask[0, -2] = 0  # a hole inside the completion: not TRL's layout
    assert pack(ids, mask, keep, max_tokens=100) is None


def test_tree_attention_equals_attention_under_the_tree_mask():
    from types import SimpleNamespace

    ids, mask, keep = _batch([[5, 6, 7, 8, 9], [5, 6, 7, 2], [5, 6, 7, 8, 9]], [[1, 2, 3], [4], [5, 6]])
    (packed,) = pack(ids, mask, keep, max_tokens=100)
    torch.manual_seed(0)
    n, heads, kv_heads, dim = packed.length, 6, 2, 8
    q = torch.randn(1, heads, n, dim)
    k, v = torch.randn(1, kv_heads, n, dim), torch.randn(1, kv_heads, n, dim)
    module = SimpleNamespace(num_key_value_groups=heads // kv_heads)
    got, _ = tree_attention(module, q, k, v, None, scaling=0.3, tree=packed.tree)
    rep = heads // kv_heads
    want = torch.nn.functional.scaled_dot_product_attention(
        q,
        k.repeat_interleave(rep, 1),
        v.repeat_interleave(rep, 1),
        attn_mask=packed.allowed()[None, None],
        scale=0.3,
    )
    assert got.shape == (1, n, heads, dim)
    assert torch.allclose(got, want.transpose(1, 2), atol=1e-6)


def test_micro_batches_are_recut_by_prompt():
    prompt = torch.tensor([[1, 2], [3, 4], [1, 2], [3, 4]])
    chunks = [
        {
            "prompt_ids": prompt[:2],
            "prompt_mask": torch.ones(2, 2),
            "advantages": torch.tensor([0.1, 0.2]),
            "names": ["a0", "b0"],
            "num_items_in_batch": torch.tensor(9.0),
            "old": None,
        },
        {
            "prompt_ids": prompt[2:],
            "prompt_mask": torch.ones(2, 2),
            "advantages": torch.tensor([0.3, 0.4]),
            "names": ["a1", "b1"],
            "num_items_in_batch": torch.tensor(9.0),
            "old": None,
        },
    ]
    assert prompt_order({"prompt_ids": prompt, "prompt_mask": torch.ones(4, 2)}) == [0, 2, 1, 3]
    regrouped = group_by_prompt(chunks)
    assert [c["names"] for c in regrouped] == [["a0", "a1"], ["b0", "b1"]]
    assert torch.equal(regrouped[0]["advantages"], torch.tensor([0.1, 0.3]))
    assert float(regrouped[1]["num_items_in_batch"]) == 9.0 and regrouped[1]["old"] is None


# --------------------------------------------------------------------------- one step on a real model

SYSTEM = "You are the root of a due-diligence review. Read the data room through subagents. " * 6
REWARDS = {"a": [1.0, 0.0], "b": [0.25, 0.75]}
ANSWERS = ["The buyer may terminate on notice.", "No change-of-control clause was found in the lease; ask."]


def _runner(prompts, trainer):
    seen: dict[str, int] = {}
    episodes = []
    for p in prompts:
        i = seen[p] = seen.get(p, -1) + 1
        messages = [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"Summarise clause {p}." + " Cite the section." * (3 if p == "b" else 0),
            },
            {"role": "assistant", "content": f"Clause {p}: " + ANSWERS[i] * (1 + i)},
        ]
        episodes.append(Episode(messages, REWARDS[p][i]))
    return episodes


@pytest.mark.slow
def test_packed_step_equals_the_plain_step_with_fewer_tokens(smollm2_path, tmp_path):
    from trl import GRPOTrainer

    from pipeline.training.shared_prefix import SharedPrefixPacking, trainer_class

    def step(cls, name, micro_batch):
        return one_step(
            cls,
            smollm2_path,
            tmp_path / name,
            _runner,
            ["a", "b"],
            group=2,
            micro_batch=micro_batch,
            optim="sgd",
            learning_rate=1.0,
        )

    _, start, plain_after, plain_passes = step(GRPOTrainer, "plain", 1)
    moved = max(float((plain_after[n] - start[n]).abs().max()) for n in start)
    assert moved > 1e-4  # the step has a gradient to compare
    for name, cls, micro_batch, passes in [
        ("group", SharedPrefixPacking, 2, 2),  # one pass per group: its prompt once
        ("batch", SharedPrefixPacking, 4, 1),  # both groups in one pass: the system prompt once
        ("both", trainer_class(True, True), 2, 2),  # with flat-group skipping (no flat group here)
    ]:
        trainer, before, after, n_passes = step(cls, name, micro_batch)
        assert all(torch.equal(start[n], before[n]) for n in start)
        worst = max(float(((after[n] - before[n]) - (plain_after[n] - start[n])).abs().max()) for n in start)
        assert worst <= 1e-4 * moved, (name, worst, moved)
        assert plain_passes == 4 and n_passes == passes, name
        assert trainer.pack_reason is None
        assert 0 < trainer.packed_tokens < trainer.padded_tokens, name
