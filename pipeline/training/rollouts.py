"""GRPO rollouts: episodes -> the token sequences TRL's ``rollout_func`` returns, with root-only masks.

TRL's GRPOTrainer (1.16) calls ``rollout_func(prompts, trainer)`` with the
generation batch's prompts, each already repeated ``num_generations`` times
(groups are consecutive), and expects one completion per prompt:
``prompt_ids``, ``completion_ids``, ``logprobs`` (the sampler's
log-probability of each completion token, or None), and any further key,
which reaches the reward functions as a keyword argument. The key
``env_mask`` is multiplied into the loss mask. TRL keeps ``logprobs`` as
``sampling_per_token_logps``; it does not compute them itself.

A root episode is multi-turn: root completion, REPL output, root completion,
..., memo. ``prompt_ids`` is everything before the root's first own token
(system prompt, worked example, task, the generation prompt) and
``completion_ids`` runs from there to the root's last own token.

Token in, token out. When every root turn carries the token ids its server
sampled (``Turn.token_ids``: RL rollouts ask vLLM for them,
models.root.return_tokens), those ids are the root's tokens, exactly: the
stop string and the end-of-turn token the model itself sampled are in them,
and nothing else is. Everything between two root turns (the end-of-turn token
after a turn stopped by the stop string, the closing fence the harness adds
to a turn cut by the length limit, the REPL output, the template's role
headers) is rendered by the chat template and tokenized, with ``env_mask``
0: trained on nothing, seen as context. ``logprobs`` are the server's
log-probabilities of the sampled tokens (0 on env tokens, which the loss
masks), for the off-policy correction (pipeline.training.importance).

An episode whose turns lack token ids (an in-process or older rollout) is
tokenized as the SFT dataset tokenizes it
(pipeline.training.masking.tokenize_conversation, the chat template rendered
once): ``env_mask`` is 1 on the root's completions and their end-of-turn
tokens, and its ``logprobs`` are NaN (no correction). The SFT path keeps that
tokenization: it trains on text, not on sampled ids.

The reward travels as the extra key ``rl_reward`` and ``reward_from_rollout``
hands it to TRL. An episode that failed before the root's first token, or on
the server, has reward None: TRL leaves it out of its group's baseline and
gives it advantage 0.

What runs an episode is the caller's (``EpisodeRunner``): pipeline.training.rl
runs real harness episodes on rooms and grades them with the reference judge;
``single_turn_runner`` answers one chat message, for the sign test and the
multi-process check.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.training.masking import render_segments, tokenize_conversation

REWARD_KEY = "rl_reward"


@dataclass
class Episode:
    """One rollout: the root's conversation and its reward."""

    messages: list[dict[str, Any]]  # Trace.messages(); empty when the episode never reached the root
    reward: float | None  # None: failed before the root's first token or on the server (no advantage)
    extra: dict[str, Any] = field(default_factory=dict)  # further per-rollout values for reward functions
    turns: list[Any] = field(default_factory=list)  # Trace.turns, whose token_ids make the rollout exact


# (prompts as TRL passes them, the trainer) -> one Episode per prompt, in order
EpisodeRunner = Callable[[list[Any], Any], list[Episode]]


@dataclass
class RolloutTokens:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]  # 1 = a token the root wrote (trained), 0 = everything else
    # Per completion token: the sampler's log-probability (0 on env tokens; NaN where unknown).
    logprobs: list[float] = field(default_factory=list)
    exact: bool = False  # the root's tokens are the ids its server sampled

    def __post_init__(self) -> None:
        if not self.logprobs:
            self.logprobs = [math.nan] * len(self.completion_ids)

    @property
    def n_trained(self) -> int:
        return sum(self.env_mask)


def rollout_tokens(
    tokenizer: Any, messages: Sequence[dict[str, Any]], max_length: int, chat_template: str | None = None
) -> RolloutTokens:
    """Split one episode's conversation into prompt / completion ids and the completion's env_mask."""
    eos = tokenizer.eos_token_id
    if not messages:
        # An episode that failed before the root wrote anything: one masked token, so it carries no gradient.
        return RolloutTokens([eos], [eos], [0])
    ex = tokenize_conversation(tokenizer, messages, chat_template, where="rollout")
    masks = ex.assistant_masks
    if 1 not in masks:
        return RolloutTokens(ex.input_ids or [eos], [eos], [0])
    first = masks.index(1)
    last = len(masks) - 1 - masks[::-1].index(1)
    # Template glue after the last end-of-turn ("\n") is dropped, so the completion ends at EOS as TRL expects.
    prompt, completion, env = ex.input_ids[:first], ex.input_ids[first : last + 1], masks[first : last + 1]
    room = max(1, max_length - len(prompt))
    if len(completion) > room:
        # Too long for the update: the tail is cut (TRL then sees no EOS and counts it as clipped).
        completion, env = completion[:room], env[:room]
    return RolloutTokens(prompt, completion, env)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def sampled_rollout_tokens(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    turns: Sequence[Any],
    max_length: int,
    chat_template: str | None = None,
) -> RolloutTokens | None:
    """The rollout from the ids the server sampled on each root turn; None when a turn lacks them.

    ``messages`` is the conversation (Trace.messages()) and ``turns`` its root turns, in order: the
    k-th trained assistant message is turn k's completion.
    """
    if not turns or any(not t.token_ids for t in turns):
        return None
    segments = render_segments(tokenizer, messages, chat_template, where="rollout")
    trained = [s for s in segments if s.trained]
    if len(trained) != len(turns):
        return None
    ids: list[int] = []
    env: list[int] = []
    lps: list[float] = []
    pending = ""  # template text not yet tokenized: context, never trained

    def flush() -> None:
        nonlocal pending
        if pending:
            glue = tokenizer(pending, add_special_tokens=False)["input_ids"]
            ids.extend(glue)
            env.extend([0] * len(glue))
            lps.extend([0.0] * len(glue))
        pending = ""

    k = 0
    for seg in segments:
        if not seg.trained:
            pending += seg.text
            continue
        turn = turns[k]
        k += 1
        pending += seg.text[: seg.trained_start]  # the generation prompt the server added
        flush()
        ids.extend(turn.token_ids)
        env.extend([1] * len(turn.token_ids))
        sampled_lps = turn.token_logprobs or [None] * len(turn.token_ids)
        lps.extend(math.nan if x is None else float(x) for x in sampled_lps)
        # What the template wrote after the sampled text (end-of-turn after a stop string, the fence the
        # harness closed a cut block with) is context for the next turn, not the root's.
        body = seg.text[seg.trained_start :]
        sampled = tokenizer.decode(turn.token_ids, skip_special_tokens=False)
        pending = body[_common_prefix(body, sampled) :]
    first = env.index(1)
    last = len(env) - 1 - env[::-1].index(1)
    prompt, completion = ids[:first], ids[first : last + 1]
    mask, logprobs = env[first : last + 1], lps[first : last + 1]
    room = max(1, max_length - len(prompt))
    if len(completion) > room:
        completion, mask, logprobs = completion[:room], mask[:room], logprobs[:room]
    return RolloutTokens(prompt, completion, mask, logprobs, exact=True)


def episode_tokens(
    tokenizer: Any, episode: Episode, max_length: int, chat_template: str | None = None
) -> RolloutTokens:
    """The rollout of one episode: exact from sampled ids where the turns have them, else re-tokenized."""
    exact = sampled_rollout_tokens(tokenizer, episode.messages, episode.turns, max_length, chat_template)
    return exact or rollout_tokens(tokenizer, episode.messages, max_length, chat_template)


def make_rollout_func(
    runner: EpisodeRunner, tokenizer: Any, max_length: int, chat_template: str | None = None
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """TRL's ``rollout_func`` over an episode runner."""

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        episodes = runner(prompts, trainer)
        if len(episodes) != len(prompts):
            raise RuntimeError(
                f"the episode runner returned {len(episodes)} episodes for {len(prompts)} prompts"
            )
        toks = [episode_tokens(tokenizer, e, max_length, chat_template) for e in episodes]
        out: dict[str, Any] = {
            "prompt_ids": [t.prompt_ids for t in toks],
            "completion_ids": [t.completion_ids for t in toks],
            # The sampler's log-probabilities where any rollout has them (NaN elsewhere: ratio 1).
            "logprobs": [t.logprobs for t in toks] if any(t.exact for t in toks) else None,
            "env_mask": [t.env_mask for t in toks],
            REWARD_KEY: [None if e.reward is None else float(e.reward) for e in episodes],
        }
        for key in sorted({k for e in episodes for k in e.extra}):
            out[key] = [e.extra.get(key) for e in episodes]
        return out

    return rollout_func


def shared_rollouts(
    rollout_func: Callable[[list[Any], Any], dict[str, Any]],
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """``rollout_func`` run by the main process for every process of a multi-process launch.

    Under ``accelerate launch`` TRL calls ``rollout_func`` in every process with that process's share
    of the generation batch, and orders the batch by process (groups may span two processes). Here
    every share is gathered to the main process, which alone runs the episodes (it alone holds the
    warehouse the rollouts are written to: DuckDB has one writer), and each process gets back its
    own slice of the result. With one process it is ``rollout_func`` itself.
    """

    def run(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        acc = trainer.accelerator
        if acc.num_processes == 1:
            return rollout_func(prompts, trainer)
        from accelerate.utils import broadcast_object_list, gather_object

        everyone = gather_object(list(prompts))  # the whole batch, in process order
        box = [rollout_func(everyone, trainer) if acc.is_main_process else None]
        broadcast_object_list(box, from_process=0)
        lo, hi = acc.process_index * len(prompts), (acc.process_index + 1) * len(prompts)
        return {k: v[lo:hi] if isinstance(v, list) else v for k, v in box[0].items()}

    return run


def reward_from_rollout(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward the episode runner computed (the judge's headline), as TRL's reward function.

    None for a failed episode: TRL then leaves it out of its group's mean and gives it advantage 0.
    """
    return [None if r is None else float(r) for r in kwargs[REWARD_KEY]]


# --------------------------------------------------------------------------- generating with the live model


class LivePolicy:
    """The trainer's own model as a root backend, for the duration of one generation batch.

    In-process generation: no server, no weight sync — the rollouts of step s
    are sampled from exactly the weights after step s-1. The model is put in
    eval mode (no dropout) and back into training mode after.
    """

    def __init__(self, trainer: Any, backend_cfg: Any, tokenizer: Any, name: str) -> None:
        self.trainer, self.backend_cfg, self.tokenizer, self.name = trainer, backend_cfg, tokenizer, name

    def __enter__(self) -> Any:
        from pipeline.llm.local import LocalBackend

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self._was_training = model.training
        model.eval()
        self._model = model
        self.backend = LocalBackend.from_model(model, self.tokenizer, self.backend_cfg, self.name)
        return self.backend

    def __exit__(self, *exc: Any) -> None:
        self.backend.close()
        if self._was_training:
            self._model.train()


def single_turn_runner(
    tokenizer: Any,
    backend_cfg: Any,
    params: Any,
    reward: Callable[[str], float],
) -> EpisodeRunner:
    """Prompts are user messages; the live model answers each once; ``reward(answer)`` scores it."""

    def run(prompts: list[Any], trainer: Any) -> list[Episode]:
        with LivePolicy(trainer, backend_cfg, tokenizer, "live") as backend:

            async def go() -> list[Any]:
                msgs = [[{"role": "user", "content": str(p)}] for p in prompts]
                return await asyncio.gather(*(backend.complete(m, params) for m in msgs))

            comps = asyncio.run(go())
        return [
            Episode(
                [{"role": "user", "content": str(p)}, {"role": "assistant", "content": c.text}],
                reward(c.text),
            )
            for p, c in zip(prompts, comps, strict=True)
        ]

    return run
