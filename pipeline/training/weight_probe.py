"""The weight probe: does the server's LoRA module hold the trainer's weights?

Before a GRPO step samples, the server scores a fixed sequence (a short root
turn in the chat template) under the step's module (``prompt_logprobs`` of
vLLM's completions endpoint, given token ids, so both sides read the same
tokens), and the trainer scores it with its live model. The mean absolute
difference of the two log-probabilities per token is the probe's value. A
module loaded from other weights (another run's adapter under a reused name,
a module the server kept from before) differs by more than the dtype's
rounding; the step then fails with one line instead of sampling from the
wrong policy.

The tolerance (``rl.probe_tolerance``) must cover the serving dtype: vLLM on
CPU serves bfloat16 where the CPU has the instructions, and the trainer scores
in float32 (docs/rl.md, "Measured", gives both differences).
"""

from __future__ import annotations

from typing import Any

import requests

from pipeline.errors import UserError

PROBE_MESSAGES = [
    {
        "role": "system",
        "content": "You are the root of a due-diligence agent. Write Python in one code block.",
    },
    {"role": "user", "content": "Find the change-of-control clauses in the material contracts."},
    {
        "role": "assistant",
        "content": "```python\ndocs = room.docs(category='material_contracts')\n"
        "answers = llm_batch([f'Change of control in {d.path}?' for d in docs])\nprint(answers)\n```",
    },
]


class ProbeMismatch(UserError):
    """The server's module scores the probe differently from the trainer's weights."""


def probe_ids(tokenizer: Any) -> list[int]:
    text = tokenizer.apply_chat_template(PROBE_MESSAGES, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def server_logprobs(base_url: str, model: str, ids: list[int], timeout_s: float = 120.0) -> list[float]:
    """The server's log-probability of each token of ``ids`` after the first, under ``model``."""
    url = f"{base_url.rstrip('/')}/completions"
    body = {"model": model, "prompt": ids, "max_tokens": 1, "prompt_logprobs": 0, "temperature": 1.0}
    try:
        resp = requests.post(url, json=body, timeout=timeout_s)
        resp.raise_for_status()
        rows = resp.json()["choices"][0]["prompt_logprobs"]
    except (requests.RequestException, KeyError, IndexError, TypeError, ValueError) as exc:
        raise ProbeMismatch(
            f"{url}: the weight probe got no prompt log-probabilities for {model!r} ({exc})"
        ) from exc
    return [float(rows[i][str(tok)]["logprob"]) for i, tok in enumerate(ids) if i > 0]


def trainer_logprobs(model: Any, ids: list[int]) -> list[float]:
    """The live model's log-probability of each token of ``ids`` after the first (eval mode, no grad)."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            device = next(model.parameters()).device
            x = torch.tensor([ids], device=device)
            logits = model(input_ids=x).logits[0, :-1].float()
            logps = torch.log_softmax(logits, dim=-1).gather(1, x[0, 1:, None])[:, 0]
    finally:
        if was_training:
            model.train()
    return logps.tolist()


def probe_difference(base_url: str, module: str, model: Any, tokenizer: Any) -> float:
    """Mean absolute difference (nats per token) between the server's and the trainer's log-probabilities."""
    ids = probe_ids(tokenizer)
    served = server_logprobs(base_url, module, ids)
    mine = trainer_logprobs(model, ids)
    return sum(abs(a - b) for a, b in zip(served, mine, strict=True)) / len(mine)


def check_probe(
    base_url: str, module: str, model: Any, tokenizer: Any, tolerance: float, where: str
) -> float:
    """The probe's value; raises ProbeMismatch (one line) above ``tolerance``."""
    diff = probe_difference(base_url, module, model, tokenizer)
    if diff > tolerance:
        raise ProbeMismatch(
            f"{where}: the server's module {module!r} does not hold the trainer's weights: its log-probabilities "
            f"of the probe differ by {diff:.3f} nats per token (rl.probe_tolerance {tolerance:g})"
        )
    return diff
