"""Training support: chat-template masking (masking), dataset cards (card), base-model lookup."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.llm.smollm2 import DEFAULT_MODEL_NAME


def base_model_path(base_model: str) -> str:
    """A policy's base_model -> something from_pretrained takes: the embedded model's folder, else as given."""
    if base_model in ("", DEFAULT_MODEL_NAME):
        from pipeline.llm.smollm2 import ensure_model

        # The embedded model never comes from the hub; a hub id given as base_model may.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(ensure_model())
    path = Path(base_model).expanduser()
    return str(path) if path.exists() else base_model


def load_tokenizer(base_model: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(base_model_path(base_model))
