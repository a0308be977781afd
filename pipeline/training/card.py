"""Dataset card: what a training dataset was built from, as card.json and a README.md.

The card is the dataset folder's description of itself: the warehouse and
selection it came from, the filter parameters of that selection, counts,
token statistics, the config and its hash, the masking rule, and every
trajectory id per split, so a dataset found on disk can be traced back to
the rows that made it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def token_stats(n_tokens: Sequence[int], n_trained: Sequence[int]) -> dict[str, Any]:
    """Totals and distribution of example lengths and trained (unmasked) tokens."""
    if not n_tokens:
        return {"examples": 0, "tokens": 0, "trained_tokens": 0}
    ordered = sorted(n_tokens)

    def pct(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]

    total, trained = sum(n_tokens), sum(n_trained)
    return {
        "examples": len(n_tokens),
        "tokens": total,
        "trained_tokens": trained,
        "trained_fraction": round(trained / total, 4) if total else 0.0,
        "mean": round(statistics.fmean(n_tokens), 1),
        "min": ordered[0],
        "p50": pct(0.5),
        "p95": pct(0.95),
        "max": ordered[-1],
    }


def render_readme(card: dict[str, Any]) -> str:
    """Human-readable README.md (Hugging Face dataset-card layout: YAML header, then prose)."""
    counts = card["counts"]
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        "    path: parquet/train.parquet",
        "  - split: validation",
        "    path: parquet/validation.parquet",
        "tags:",
        "- sft",
        "- rlm",
        "- self-distillation",
        "---",
        "",
        f"# {card['dataset_id']} (version {card['version']})",
        "",
        "Chat-format SFT examples of the RLM root agent's own conversations: system prompt, task, every",
        "root completion (the code it wrote) and every REPL output it was shown. Subagent calls are not",
        "included. Loss is on the root's own tokens only (`labels` is -100 elsewhere; `assistant_masks`",
        "is 1 on trained tokens).",
        "",
        "## Source",
        "",
        f"- warehouse: `{card['source']['db_path']}` (relative to the run folder holding `datasets/`)",
        f"- selection: `{card['selection_id']}`",
        f"- filter parameters: `{json.dumps(card['filter_params'], sort_keys=True)}`",
        f"- base model / tokenizer: `{card['tokenizer']['base_model']}`",
        f"- config hash: `{card['config_hash']}`",
        f"- context distillation: {'yes — worked examples removed from the prompt' if card['context_distillation'] else 'no — worked examples kept in the prompt, masked'}",
        "",
        "## Counts",
        "",
        "| accepted | train | validation | dropped (longer than max_length) |",
        "|---|---|---|---|",
        f"| {counts['accepted']} | {counts['train']} | {counts['validation']} | {counts['dropped_too_long']} |",
        "",
        f"Split by room (seed {card['split']['seed']}): train rooms {', '.join(card['split']['train_rooms']) or '-'};"
        f" validation rooms {', '.join(card['split']['validation_rooms']) or '-'}.",
        "",
        "## Tokens",
        "",
        "| split | examples | tokens | trained tokens | mean | p50 | p95 | max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for split, st in card["token_stats"].items():
        lines.append(
            f"| {split} | {st['examples']} | {st['tokens']} | {st['trained_tokens']} | {st.get('mean', '-')} "
            f"| {st.get('p50', '-')} | {st.get('p95', '-')} | {st.get('max', '-')} |"
        )
    lines += ["", "## Trajectories", ""]
    for split, ids in card["trajectory_ids"].items():
        lines.append(f"- {split} ({len(ids)}): {', '.join(f'`{i}`' for i in ids) or '-'}")
    lines.append("")
    return "\n".join(lines)


def write_card(folder: Path, card: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True, default=str) + "\n")
    (folder / "README.md").write_text(render_readme(card))
