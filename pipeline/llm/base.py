"""Model backends: one async interface, a registry chosen by config.

A backend turns chat messages into a ``Completion``. Stages never sniff
model names: ``make_backend(BackendConfig)`` looks ``kind`` up in
``REGISTRY`` (local | openai | extractive; tests register ``scripted``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pipeline.config import BackendConfig


class ContextLimitError(ValueError):
    """A prompt longer than the backend's context window (refused, never cut)."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    model: str = ""
    finish_reason: str = ""


@dataclass
class GenerationParams:
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] | None = None
    seed: int | None = None


class Backend(Protocol):
    name: str  # model name recorded in traces and usage
    context_tokens: int

    async def complete(self, messages: list[dict[str, str]], params: GenerationParams) -> Completion: ...

    async def aclose(self) -> None: ...


REGISTRY: dict[str, Callable[[BackendConfig], Backend]] = {}


def register(kind: str) -> Callable:
    def deco(factory: Callable[[BackendConfig], Backend]) -> Callable[[BackendConfig], Backend]:
        REGISTRY[kind] = factory
        return factory

    return deco


def make_backend(cfg: BackendConfig) -> Backend:
    # Importing the implementations registers them.
    from pipeline.llm import extractive, local, openai_backend  # noqa: F401

    if cfg.kind not in REGISTRY:
        raise KeyError(f"models.*.kind: unknown backend {cfg.kind!r} (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[cfg.kind](cfg)
