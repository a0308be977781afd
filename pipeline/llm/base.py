"""Model backends: one async interface, chosen by config through a lazy registry.

A backend turns chat messages into a ``Completion``. Stages never sniff
model names: ``make_backend(BackendConfig)`` looks ``kind`` up in
``BACKENDS`` (local | openai | extractive), a map of names to
``"module:attr"`` factories imported only when asked for, so building one
backend never imports the others (torch, aiohttp). A ``kind`` holding a
colon is itself such a spec (``"my_team.backends:make_mine"``, or the
tests' scripted backend): it resolves by import wherever the config goes,
Ray workers included, with no registration step.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pipeline.config import BackendConfig, ConfigError


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
    reasoning: str = (
        ""  # a reasoning model's separate thinking (e.g. GLM's reasoning_content), kept in traces
    )
    # The token ids the server sampled and each one's log-probability under the sampling distribution
    # (BackendConfig.return_tokens); None when not asked for or the server cannot say.
    token_ids: list[int] | None = None
    logprobs: list[float | None] | None = None


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


BackendFactory = Callable[[BackendConfig], Backend]

# kind -> "module:attr" of a factory taking the BackendConfig. Strings, so
# that naming a backend imports only that backend.
BACKENDS: dict[str, str] = {
    "local": "pipeline.llm.local:make_local",
    "openai": "pipeline.llm.openai_backend:make_openai",
    "extractive": "pipeline.llm.extractive:make_extractive",
}


def backend_factory(kind: str) -> BackendFactory:
    """The factory for ``kind``: a name in ``BACKENDS`` or a ``"module:attr"`` spec."""
    spec = BACKENDS.get(kind) or (kind if ":" in kind else None)
    if spec is None:
        raise ConfigError(
            f"models.*.kind: unknown backend {kind!r} "
            f"(known: {', '.join(sorted(BACKENDS))}, or a 'module:attr' factory)"
        )
    try:
        return pkgutil.resolve_name(spec)
    except (AttributeError, ValueError) as exc:
        # A module that fails to import (a missing optional dependency) raises its own ImportError.
        raise ConfigError(f"models.*.kind: cannot load backend factory {spec!r}: {exc}") from exc


def make_backend(cfg: BackendConfig) -> Backend:
    return backend_factory(cfg.kind)(cfg)
