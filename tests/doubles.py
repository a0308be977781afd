"""Test doubles shared by unit tests: a backend that replays fixed completions.

``ScriptedBackend(["a", "b"])`` answers the n-th request with the n-th
string; ``ScriptedBackend(fn)`` answers with ``fn(messages)``. Like a real
server it cuts the text at the first stop string (the stop string itself is
not returned) and respects ``max_tokens`` roughly (4 characters a token).
Every request is kept in ``.calls`` for assertions.

As a configured backend: ``BackendConfig(kind=SCRIPTED_KIND, model="<key>")``
replays ``SCRIPTS[<key>]``. The kind is a ``"module:attr"`` spec, so a Ray
worker finds the factory by importing it; a module that fills ``SCRIPTS`` at
import and re-exports ``make_scripted`` can be named instead, so workers get
its scripts too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.config import BackendConfig
from pipeline.llm.base import Completion, ContextLimitError, GenerationParams
from pipeline.rooms.model import count_tokens

Script = list[str] | Callable[[list[dict[str, Any]]], str]

# Scripts for backends built through make_backend(BackendConfig(kind=SCRIPTED_KIND, model=key)).
SCRIPTS: dict[str, Script] = {}
SCRIPTED_KIND = "tests.doubles:make_scripted"


class ScriptExhausted(AssertionError):
    """The code under test asked for more completions than the script holds."""


class ScriptedBackend:
    def __init__(self, completions: Script, name: str = "scripted", context_tokens: int = 8192) -> None:
        self.name = name
        self.context_tokens = context_tokens
        self._script = completions
        self._next = 0
        self.calls: list[tuple[list[dict[str, Any]], GenerationParams]] = []
        self.closed = False

    async def complete(self, messages: list[dict[str, Any]], params: GenerationParams) -> Completion:
        self.calls.append(([dict(m) for m in messages], params))
        prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
        if prompt_tokens > self.context_tokens:
            raise ContextLimitError(
                f"{self.name}: prompt of {prompt_tokens} tokens exceeds the context of {self.context_tokens}"
            )
        if callable(self._script):
            text = self._script(messages)
        else:
            if self._next >= len(self._script):
                raise ScriptExhausted(
                    f"ScriptedBackend {self.name!r}: asked for completion {self._next + 1}, "
                    f"the script holds {len(self._script)}"
                )
            text = self._script[self._next]
        self._next += 1
        finish = "stop"
        for stop in params.stop or []:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        if count_tokens(text) > params.max_tokens:
            text, finish = text[: params.max_tokens * 4], "length"
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=count_tokens(text),
            latency_s=0.0,
            model=self.name,
            finish_reason=finish,
        )

    async def aclose(self) -> None:
        self.closed = True


def make_scripted(cfg: BackendConfig) -> ScriptedBackend:
    key = cfg.model or "scripted"
    if key not in SCRIPTS:
        raise KeyError(f"models.*.model: no script registered under {key!r} in tests.doubles.SCRIPTS")
    return ScriptedBackend(SCRIPTS[key], name=key, context_tokens=cfg.context_tokens)


def memo_score_row(
    trajectory_id: str, recall: float, precision: float = 1.0, judge: str = "reference", graded_at=None
) -> dict:
    """A `memo_scores` row as the grade stage writes it, for warehouses built by hand in tests."""
    from pipeline import db
    from pipeline.grading.reference import GRADER_VERSION, headline

    return {
        "trajectory_id": trajectory_id,
        "judge": judge,
        "grader_version": GRADER_VERSION,
        "recall": recall,
        "precision": precision,
        "headline": headline(recall, precision),
        "n_claims": 0,
        "n_false_claims": 0,
        "traps_failed": 0,
        "memo_words": 100,
        "budget_words": 1000,
        "cut": False,
        "quoted_words": 0,
        "graded_at": graded_at or db.now(),
    }
