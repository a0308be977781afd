"""The trace of one trajectory: a single lossless value the sampler stores.

Times (``*_s``) are seconds from the trajectory's start, so "did the root
begin its memo before the last subagent call returned" is a comparison of
two numbers. ``Trace.to_dict`` / ``Trace.from_dict`` round-trip exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = ("submitted", "turn_limit", "budget", "error", "timeout")


@dataclass
class Turn:
    index: int
    new_messages: list[dict[str, str]]  # messages appended since the previous turn
    completion: str
    code: str | None = None  # the code blocks run this turn, joined
    output: str | None = None  # what the root was shown, after the cut
    error: str | None = None  # short traceback / limit message, if any
    prompt_tokens: int = 0
    completion_tokens: int = 0
    started_s: float = 0.0
    ended_s: float = 0.0
    reasoning: str | None = None  # the root's separate thinking, when its server returns one
    # What the server sampled for this turn (models.root.return_tokens): the token ids, stop string and
    # end-of-turn token included, and each one's log-probability. None when not asked for.
    token_ids: list[int] | None = None
    token_logprobs: list[float | None] | None = None


@dataclass
class Subcall:
    index: int
    turn_index: int
    depth: int
    model: str
    prompt: str
    response: str | None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    issued_s: float = 0.0
    returned_s: float = 0.0
    parent_call: int | None = None  # depth-2: the rlm_query call this belongs to


@dataclass
class Trace:
    trajectory_id: str
    room: str
    policy_id: str
    harness: str = "rlm"
    turns: list[Turn] = field(default_factory=list)
    subcalls: list[Subcall] = field(default_factory=list)
    children: list[Trace] = field(default_factory=list)  # depth-2 child RLM traces
    memo: str | None = None
    status: str = "error"
    end_reason: str = ""
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # model -> prompt/completion tokens, calls
    started_at: str = ""  # ISO timestamp
    wall_s: float = 0.0
    submit_turn_started_s: float | None = None  # start of the turn that called submit()
    sandbox_level: str | None = None  # kernel layer under the REPL: bwrap+seccomp | seccomp | python
    subagent_budget_tokens: int | None = None  # the subagent token budget the episode ran under

    def add_usage(self, model: str, prompt_tokens: int, completion_tokens: int) -> None:
        u = self.usage.setdefault(model, {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0})
        u["prompt_tokens"] += prompt_tokens
        u["completion_tokens"] += completion_tokens
        u["calls"] += 1

    def messages(self) -> list[dict[str, str]]:
        """The root's full conversation as it saw it, plus its completions."""
        out: list[dict[str, str]] = []
        for t in self.turns:
            out.extend(t.new_messages)
            reply = {"role": "assistant", "content": t.completion}
            if t.reasoning:  # chat templates of reasoning models (GLM) render it; others ignore the key
                reply["reasoning_content"] = t.reasoning
            out.append(reply)
        return out

    def to_dict(self) -> dict[str, Any]:
        # Shallow copies instead of dataclasses.asdict (which deep-copies every
        # value): the sampler serialises every trace, so this is on the hot path.
        d = dict(vars(self))
        d["turns"] = [dict(vars(t)) for t in self.turns]
        d["subcalls"] = [dict(vars(c)) for c in self.subcalls]
        d["children"] = [c.to_dict() for c in self.children]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        d = dict(d)
        if "memo_started_s" in d:  # the field's name in traces written before migration 007
            d["submit_turn_started_s"] = d.pop("memo_started_s")
        d["turns"] = [Turn(**t) for t in d.get("turns", [])]
        d["subcalls"] = [Subcall(**s) for s in d.get("subcalls", [])]
        d["children"] = [Trace.from_dict(c) for c in d.get("children", [])]
        return cls(**d)
