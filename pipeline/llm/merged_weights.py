"""A LoRA adapter merged into its base model's weights, as a model folder a server can load.

Under ``serve.adapters`` merged (pipeline.serving) the root's server holds one
policy's weights at a time: the base's, or the base with a policy's adapter
merged in (peft's ``merge_and_unload``: W + (alpha / r) B A per target
module). The folder is cached under ``<run.dir>/merged/<weights hash>``, so a
policy evaluated in several blocks is merged once; it is written to a
temporary sibling and renamed into place, so a killed merge leaves nothing a
later load would take for complete. Only the newest ``KEEP`` folders stay (a
135M model is half a GiB in float32; an RL run makes one per step).

The merge runs in float32 and is saved in the base checkpoint's own dtype, so
the server casts it to its ``--dtype`` exactly as it casts the base.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pipeline.errors import UserError

KEEP = 4
_DONE = "merge_done"


def merged_dir(run_dir: str | Path, weights_hash: str) -> Path:
    return Path(run_dir) / "merged" / weights_hash


def merge_adapter(base: str | Path, adapter: str | Path, out: Path) -> Path:
    """The base at ``base`` with the adapter at ``adapter`` merged in, saved to ``out`` (once)."""
    if (out / _DONE).exists():
        return out
    import torch
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if not (Path(adapter) / "adapter_config.json").exists():
        raise UserError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
    dtype = getattr(AutoConfig.from_pretrained(base), "dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        merged.to(dtype).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(base).save_pretrained(tmp)
        for extra in ("generation_config.json",):
            if (Path(base) / extra).exists() and not (tmp / extra).exists():
                shutil.copy(Path(base) / extra, tmp / extra)
        (tmp / _DONE).touch()
        if out.exists():  # an unfinished folder from a killed merge
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    prune(out.parent, keep=KEEP, spare=out)
    return out


def prune(folder: Path, keep: int, spare: Path) -> None:
    """Remove all but the ``keep`` newest merged folders in ``folder`` (never ``spare``)."""
    done = sorted(
        (p for p in folder.iterdir() if p.is_dir() and (p / _DONE).exists() and p != spare),
        key=lambda p: (p / _DONE).stat().st_mtime,
        reverse=True,
    )
    for old in done[max(0, keep - 1) :]:
        shutil.rmtree(old, ignore_errors=True)
