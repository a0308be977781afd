"""LoRA modules on a running vLLM server: see what it serves, load an adapter by name.

A trained policy is evaluated through the server that serves its base model:
the adapter becomes a LoRA module named after the policy
(``Policy.served_model``), and requests select it by that name. If the server
does not serve the module yet it is loaded at runtime with
``POST /v1/load_lora_adapter`` (the server must run with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` and ``--enable-lora``; `python -m
pipeline serve` starts it so). The adapter folder must be readable by the
server under the same path (same machine or shared storage).
"""

from __future__ import annotations

from pathlib import Path

import requests

from pipeline.errors import UserError

TIMEOUT_S = 120.0  # loading an adapter reads its weights: seconds on CPU, more on a busy server


class LoraModuleError(UserError):
    """A module the server does not serve and cannot load; the message lists what it serves."""


def served_models(base_url: str, timeout_s: float = 10.0) -> list[str]:
    """The model names (base models and LoRA modules) the server at ``base_url`` answers to."""
    url = f"{base_url.rstrip('/')}/models"
    try:
        resp = requests.get(url, timeout=timeout_s)
        resp.raise_for_status()
        return [m["id"] for m in resp.json()["data"]]
    except (requests.RequestException, KeyError, TypeError, ValueError) as exc:
        raise LoraModuleError(f"{url}: cannot list the served models ({exc})") from exc


def ensure_lora_module(base_url: str, name: str, adapter: str | Path, timeout_s: float = TIMEOUT_S) -> bool:
    """Make ``name`` a model the server answers to; returns True when it had to be loaded now."""
    served = served_models(base_url)
    if name in served:
        return False
    url = f"{base_url.rstrip('/')}/load_lora_adapter"
    try:
        resp = requests.post(url, json={"lora_name": name, "lora_path": str(adapter)}, timeout=timeout_s)
    except requests.RequestException as exc:
        raise LoraModuleError(f"{url}: {exc}") from exc
    if resp.ok or "already been loaded" in resp.text:  # a concurrent loader won the race
        return True
    how = (
        "the server does not load adapters at runtime: start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "
        f"and --enable-lora, or serve the adapter with --lora-modules {name}={adapter}"
        if resp.status_code in (404, 405) and "lora" not in resp.text.lower()
        else f"loading it failed: HTTP {resp.status_code}: {resp.text[:300]}"
    )
    raise LoraModuleError(
        f"{base_url}: no model {name!r} (it serves: {', '.join(served) or 'nothing'}); {how}"
    )


def unload_lora_module(base_url: str, name: str, timeout_s: float = TIMEOUT_S) -> bool:
    """Stop serving ``name`` (RL unloads each step's module once the next one serves); True when it was served."""
    if name not in served_models(base_url):
        return False
    url = f"{base_url.rstrip('/')}/unload_lora_adapter"
    try:
        resp = requests.post(url, json={"lora_name": name}, timeout=timeout_s)
    except requests.RequestException as exc:
        raise LoraModuleError(f"{url}: {exc}") from exc
    if not resp.ok:
        raise LoraModuleError(f"{url}: unloading {name!r} failed: HTTP {resp.status_code}: {resp.text[:300]}")
    return True
