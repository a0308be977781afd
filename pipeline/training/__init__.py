"""Training: selections (selection), datasets with root-only loss masks (dataset, masking, card),
LoRA SFT runs (plan, sft), their errors (errors), and the base-model lookup shared by them.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.llm.smollm2 import DEFAULT_MODEL_NAME, EMBEDDED


def base_model_path(base_model: str, served: dict[str, str] | None = None) -> str:
    """A policy's base_model -> something from_pretrained takes: the embedded model's folder, else as given.

    A policy served by vLLM names its base model by the served name; ``served``
    (``serve.models``: served name -> weights, EMBEDDED for SmolLM2) says
    which weights that is, so training starts from what the server ran.
    """
    weights = (served or {}).get(base_model)
    if weights is not None:
        base_model = DEFAULT_MODEL_NAME if weights == EMBEDDED else weights
    if base_model in ("", DEFAULT_MODEL_NAME):
        from pipeline.llm.smollm2 import ensure_model

        # The embedded model never comes from the hub; a hub id given as base_model may.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(ensure_model())
    path = Path(base_model).expanduser()
    return str(path) if path.exists() else base_model
