"""GRPO rollout tokens: env_mask is one exactly on what the root wrote, on a real multi-turn episode.

The episode is real (the RLM harness, its sandboxed REPL, the extractive
subagents, a generated room); only the root's completions are scripted, so
the test knows which text the root wrote. Tokenization is SmolLM2's chat
template, as the SFT dataset uses it.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from pipeline.config import BackendConfig, HarnessConfig, SamplingConfig
from pipeline.harness.room_export import export_room
from pipeline.harness.root import run_episode
from pipeline.llm.base import make_backend
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.training.masking import tokenize_conversation
from pipeline.training.rollouts import (
    REWARD_KEY,
    Episode,
    make_rollout_func,
    reward_from_rollout,
    rollout_tokens,
)
from tests.doubles import ScriptedBackend

pytestmark = pytest.mark.slow  # loads the embedded model's tokenizer

ROOT_TURNS = [
    "Listing the room first.\n```python\nfor d in room.documents[:3]:\n    print(d.path)\n```\n",
    "Delegating the reading.\n```python\nanswers = llm_batch([f'Find change of control: {d.text[:400]}' "
    "for d in room.documents[:2]])\nfor a in answers:\n    print(a[:200])\n```\n",
    '```python\nsubmit("Memo: the supply agreement may carry a change of control clause.")\n```\n',
]


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_path)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    room = generate_room("rl-mask", seed=4, n_documents=6, tokens_per_document=200)
    room_dir = export_room(room, tmp_path_factory.mktemp("rooms") / room.name)
    root = ScriptedBackend(list(ROOT_TURNS))
    sub = make_backend(BackendConfig(kind="extractive"))
    harness = HarnessConfig(prompt="worked_example", max_turns=4, max_subcalls=8)
    return asyncio.run(
        run_episode(
            room, room_dir, root, sub, harness, SamplingConfig(), trajectory_id="t-1", policy_id="p", seed=1
        )
    )


def runs(ids: list[int], mask: list[int], value: int) -> list[list[int]]:
    out, prev = [], None
    for tok, m in zip(ids, mask, strict=True):
        if m == value:
            if prev != value:
                out.append([])
            out[-1].append(tok)
        prev = m
    return out


def test_env_mask_is_one_exactly_on_the_roots_tokens(trace, tokenizer):
    assert trace.status == "submitted", trace.end_reason
    assert (
        len(trace.turns) == 3 and trace.subcalls
    )  # REPL output and subagent answers are in the conversation
    messages = trace.messages()
    toks = rollout_tokens(tokenizer, messages, max_length=100_000)

    # Same ids as the SFT dataset's tokenization of the same conversation: prompt + completion, no glue after.
    ex = tokenize_conversation(tokenizer, messages)
    n = len(toks.prompt_ids) + len(toks.completion_ids)
    assert toks.prompt_ids + toks.completion_ids == ex.input_ids[:n]
    assert ex.assistant_masks[n:] == [0] * (len(ex.input_ids) - n)
    assert toks.env_mask == ex.assistant_masks[len(toks.prompt_ids) : n]
    assert (
        0 not in ex.assistant_masks[len(toks.prompt_ids) : len(toks.prompt_ids) + 1]
    )  # starts on a root token

    # The trained runs are exactly the root's completions, each closed by its end-of-turn token.
    trained = [tokenizer.decode(r) for r in runs(toks.completion_ids, toks.env_mask, 1)]
    assert trained == [t.completion + "<|im_end|>" for t in trace.turns]
    # Everything else in the completion is the harness's: REPL output (with the subagents' answers it
    # printed) inside the role headers, and nothing the root wrote.
    untrained = "".join(tokenizer.decode(r) for r in runs(toks.completion_ids, toks.env_mask, 0))
    for turn in trace.turns[:-1]:
        assert turn.output and turn.output.strip() in untrained
        assert turn.completion not in untrained
    printed = [
        c.response[:60] for c in trace.subcalls if c.response and c.response[:60] in trace.turns[1].output
    ]
    assert printed, "the root printed subagent answers; they must be in the masked part"
    assert all(p in untrained for p in printed)
    # The system prompt, worked example and task are in the prompt, never in the completion.
    system = next(m["content"] for m in messages if m["role"] == "system")
    assert system[:80] in tokenizer.decode(toks.prompt_ids)
    assert toks.completion_ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_rollout_func_contract(trace, tokenizer):
    """What TRL receives: one entry per prompt, logprobs None, env_mask aligned, the reward as an extra key."""
    episodes = [Episode(trace.messages(), 0.25), Episode([], 0.0)]
    n_prompt = len(rollout_tokens(tokenizer, trace.messages(), max_length=100_000).prompt_ids)
    fn = make_rollout_func(lambda prompts, trainer: episodes, tokenizer, max_length=n_prompt + 20)
    out = fn(["room-a", "room-a"], trainer=None)
    assert out["logprobs"] is None
    assert [len(c) for c in out["completion_ids"]] == [len(m) for m in out["env_mask"]]
    # Cut to max_length; the failed episode is one masked token, so it carries no gradient.
    assert len(out["prompt_ids"][0]) == n_prompt and len(out["completion_ids"][0]) == 20
    assert out["env_mask"][1] == [0]
    assert reward_from_rollout(["a", "a"], ["x", "y"], **{REWARD_KEY: out[REWARD_KEY]}) == [0.25, 0.0]


def test_sampled_ids_are_trained_exactly_and_the_template_glue_is_not(trace, tokenizer):
    import copy

    from pipeline.training.rollouts import episode_tokens

    # As a server returns them: each turn's ids as sampled, stopped at the code fence (no end-of-turn).
    turns = copy.deepcopy(trace.turns)
    for t in turns:
        t.token_ids = tokenizer(t.completion, add_special_tokens=False)["input_ids"]
        t.token_logprobs = [-0.25] * len(t.token_ids)
    rt = episode_tokens(tokenizer, Episode(trace.messages(), 1.0, turns=turns), 8192)
    assert rt.exact
    trained = [i for i, m in zip(rt.completion_ids, rt.env_mask, strict=True) if m]
    assert trained == [i for t in turns for i in t.token_ids]
    assert [x for x, m in zip(rt.logprobs, rt.env_mask, strict=True) if m] == [-0.25] * len(trained)
    eos = tokenizer.eos_token_id
    # The end-of-turn the template writes after each stopped turn is context, never trained ...
    assert eos not in trained and eos in [
        i for i, m in zip(rt.completion_ids, rt.env_mask, strict=True) if not m
    ]
    # ... where the re-tokenized text trains it after every turn.
    assert rollout_tokens(tokenizer, trace.messages(), 8192).n_trained == rt.n_trained + len(turns)
    # A turn without ids falls back to the re-tokenized rollout, with no sampler log-probabilities.
    turns[1].token_ids = None
    fallback = episode_tokens(tokenizer, Episode(trace.messages(), 1.0, turns=turns), 8192)
    assert not fallback.exact and all(math.isnan(x) for x in fallback.logprobs)
