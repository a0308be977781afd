"""GRPO rollouts: episodes -> the token sequences TRL's ``rollout_func`` returns, with root-only masks.

TRL's GRPOTrainer (1.16) calls ``rollout_func(prompts, trainer)`` with the
generation batch's prompts, each already repeated ``num_generations`` times
(groups are consecutive), and expects one completion per prompt:
``prompt_ids``, ``completion_ids``, ``logprobs`` (None: TRL computes the
sampling log-probs itself, as it must when the sampler is not vLLM), and any
further key, which reaches the reward functions as a keyword argument. The
key ``env_mask`` is multiplied into the loss mask.

A root episode is multi-turn: root completion, REPL output, root completion,
..., memo. Its conversation (``Trace.messages()``) is tokenized exactly as the
SFT dataset tokenizes it (pipeline.training.masking.tokenize_conversation, the
base model's chat template rendered once): ``prompt_ids`` is everything before
the root's first own token (system prompt, worked example, task, the
generation prompt), ``completion_ids`` runs from there to the root's last own
token (its final end-of-turn), and ``env_mask`` is the SFT mask on that span:
1 on the root's completions and their end-of-turn tokens, 0 on REPL output,
subagent answers the root printed, the harness's own messages and the chat
template's role headers. The reward travels as the extra key ``rl_reward``
and ``reward_from_rollout`` hands it to TRL.

What runs an episode is the caller's (``EpisodeRunner``): pipeline.training.rl
runs real harness episodes on rooms and grades them with the reference judge;
``single_turn_runner`` answers one chat message, for the sign test and the
multi-process check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.training.masking import tokenize_conversation

REWARD_KEY = "rl_reward"


@dataclass
class Episode:
    """One rollout: the root's conversation and its reward."""

    messages: list[dict[str, Any]]  # Trace.messages(); empty when the episode never reached the root
    reward: float
    extra: dict[str, Any] = field(default_factory=dict)  # further per-rollout values for reward functions


# (prompts as TRL passes them, the trainer) -> one Episode per prompt, in order
EpisodeRunner = Callable[[list[Any], Any], list[Episode]]


@dataclass
class RolloutTokens:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]  # 1 = a token the root wrote (trained), 0 = everything else

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
        toks = [rollout_tokens(tokenizer, e.messages, max_length, chat_template) for e in episodes]
        out: dict[str, Any] = {
            "prompt_ids": [t.prompt_ids for t in toks],
            "completion_ids": [t.completion_ids for t in toks],
            "logprobs": None,
            "env_mask": [t.env_mask for t in toks],
            REWARD_KEY: [float(e.reward) for e in episodes],
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


def reward_from_rollout(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """The reward the episode runner computed (the judge's headline), as TRL's reward function."""
    return [float(r) for r in kwargs[REWARD_KEY]]


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
