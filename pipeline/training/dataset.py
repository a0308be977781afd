"""Training datasets: a selection's accepted trajectories -> chat examples with root-only loss masks.

Each accepted trajectory becomes one example: the root's own conversation —
system prompt, any worked-example messages, the task, every root completion
and every REPL output as the following user turn. Subagent calls are not root
training data. The conversation is tokenized with the base model's chat
template; ``labels`` is -100 on every system / user / REPL-output /
worked-example token and the token id on the root's own completions and their
end-of-turn token (pipeline.training.masking). With
``dataset.context_distillation`` the worked-example messages are removed from
the prompt instead.

Examples longer than ``dataset.max_length`` tokens are dropped and counted.
Train and validation are split by room, deterministically from ``run.seed``.
The dataset goes to ``<run.dir>/datasets/<dataset_id>/`` as ``hf/``
(save_to_disk), ``parquet/<split>.parquet``, ``card.json`` and ``README.md``,
and is registered in ``datasets`` + ``dataset_examples``. The dataset id is
derived from the selection and the dataset config, so building the same
again finds the registered dataset and does nothing.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.harness.trace import Trace
from pipeline.ids import content_hash, digest, stable_id
from pipeline.policies import load_policy
from pipeline.run_folder import stored_path
from pipeline.trace_store import load_traces
from pipeline.training import base_model_path
from pipeline.training.card import token_stats, write_card
from pipeline.training.errors import DatasetError, NoAcceptedTrajectories
from pipeline.training.masking import MaskingError, tokenize_conversation, trained_flags
from pipeline.training.selection import require_selection

SPLITS = ("train", "validation")
MASKING_RULE = (
    "loss on the root's own completions and their end-of-turn token; system, task, "
    "REPL output and worked-example tokens are -100"
)


def config_hash(cfg: PipelineConfig) -> str:
    """Hash of what shapes the examples: the dataset section less the selection choice, and the seed."""
    d = dict(vars(cfg.dataset))
    d.pop("selection_id", None)
    return content_hash({"dataset": d, "seed": cfg.run.seed}, length=16)


def dataset_id_for(selection_id: str, chash: str) -> str:
    return stable_id(selection_id, chash, prefix="ds-", sep="\0", length=12)


def split_rooms(rooms: list[str], val_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic room split: rooms ordered by a seeded hash, the first share goes to validation.

    With two or more rooms validation gets at least one and train keeps at least one.
    """
    rooms = sorted(set(rooms))
    if len(rooms) < 2:
        return rooms, []
    ordered = sorted(rooms, key=lambda r: digest(f"{seed}:{r}", length=None))
    n_val = min(len(rooms) - 1, max(1, math.ceil(val_fraction * len(rooms))))
    val = sorted(ordered[:n_val])
    return sorted(set(rooms) - set(val)), val


def root_messages(trace: Trace, context_distillation: bool) -> list[dict[str, Any]]:
    """The root's conversation; worked examples removed when distilling the context away."""
    msgs = [dict(m) for m in trace.messages()]
    if context_distillation:
        msgs = [m for m in msgs if not m.get("example", False)]
    return msgs


def build(
    con: duckdb.DuckDBPyConnection, cfg: PipelineConfig, selection_id: str, chash: str
) -> dict[str, Any]:
    """Build (or find) the dataset of ``selection_id``; returns the dataset stage's counts."""
    dcfg = cfg.dataset
    require_selection(con, selection_id)
    dataset_id = dataset_id_for(selection_id, chash)
    folder = Path(cfg.run.dir) / "datasets" / dataset_id
    existing = db.fetch_dicts(con, "select * from datasets where dataset_id = ?", [dataset_id])
    if existing and (folder / "card.json").exists():
        e = existing[0]
        return {
            "reused": True,
            "dataset_id": dataset_id,
            "path": e["path"],
            "version": e["version"],
            "train": e["n_train"],
            "validation": e["n_validation"],
            "dropped_too_long": e["n_dropped_too_long"],
        }

    accepted = _load_accepted(con, selection_id)
    if not accepted:
        raise NoAcceptedTrajectories(
            f"selection {selection_id!r} accepted no trajectories: nothing to train on "
            "(loosen the filter.* thresholds or sample more)"
        )
    policy_ids = Counter(r["policy_id"] for r in accepted)
    base_model = _one_base_model(con, selection_id, policy_ids)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model_path(base_model, cfg.serve.models))
    kept, dropped, boundary_mismatches = _examples(con, tokenizer, accepted, cfg)
    if not kept:
        raise NoAcceptedTrajectories(
            f"selection {selection_id!r}: all {len(accepted)} accepted trajectories are longer than "
            f"dataset.max_length={dcfg.max_length} tokens"
        )

    room_of = {r["room_id"]: r["room_name"] for r in kept}
    train_rooms, val_rooms = split_rooms(list(room_of), dcfg.val_fraction, cfg.run.seed)
    rows: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for r in kept:
        rows["validation" if r["room_id"] in val_rooms else "train"].append(r)

    # A registered dataset whose folder went missing is rebuilt under its own version.
    version = existing[0]["version"] if existing else _next_version(con)
    card = {
        "dataset_id": dataset_id,
        "version": version,
        # Relative to the run folder, so a copied run folder still describes itself.
        "source": {"db_path": stored_path(cfg.run.dir, cfg.run.db_path)},
        "selection_id": selection_id,
        "filter_params": _filter_params(con, selection_id),
        "config_hash": chash,
        "config": {"dataset": dict(vars(dcfg))},
        "context_distillation": dcfg.context_distillation,
        "masking": MASKING_RULE,
        "tokenizer": {
            "base_model": base_model,
            "chat_template_sha256": digest(tokenizer.chat_template or "", length=16),
            # Examples whose per-message tokenization differs from the one-shot tokenization (a token
            # straddles a role boundary; labelled by where its first character lies).
            "boundary_mismatches": boundary_mismatches,
        },
        "policies": dict(policy_ids),
        "counts": {
            "accepted": len(accepted),
            "train": len(rows["train"]),
            "validation": len(rows["validation"]),
            "dropped_too_long": len(dropped),
        },
        "split": {
            "by": "room",
            "seed": cfg.run.seed,
            "val_fraction": dcfg.val_fraction,
            "train_rooms": sorted(room_of[r] for r in train_rooms),
            "validation_rooms": sorted(room_of[r] for r in val_rooms),
        },
        "token_stats": {s: _stats(rows[s]) for s in SPLITS} | {"dropped": _stats(dropped)},
        "trajectory_ids": {
            "train": [r["trajectory_id"] for r in rows["train"]],
            "validation": [r["trajectory_id"] for r in rows["validation"]],
            "dropped": [r["trajectory_id"] for r in dropped],
        },
    }
    _save(folder, dataset_id, rows, card)
    _register(con, card, stored_path(cfg.run.dir, folder), rows, dropped)
    return {
        "reused": False,
        "dataset_id": dataset_id,
        "version": version,
        "path": stored_path(cfg.run.dir, folder),
        "accepted": len(accepted),
        "train": len(rows["train"]),
        "validation": len(rows["validation"]),
        "dropped_too_long": len(dropped),
        "train_tokens": card["token_stats"]["train"]["tokens"],
    }


def _load_accepted(con: duckdb.DuckDBPyConnection, selection_id: str) -> list[dict]:
    return db.fetch_dicts(
        con,
        """
        select t.trajectory_id, t.room_id, coalesce(r.name, t.room_id) as room_name, t.policy_id
        from selections s
        join trajectories t using (trajectory_id)
        left join rooms r using (room_id)
        where s.selection_id = ? and s.accepted
        order by t.trajectory_id
        """,
        [selection_id],
    )


def _one_base_model(con: duckdb.DuckDBPyConnection, selection_id: str, policy_ids: Counter[str]) -> str:
    """The base model of the policies that sampled the selection: one dataset has one chat template."""
    base_models = {pid: load_policy(con, pid).base_model for pid in policy_ids}
    if len(set(base_models.values())) > 1:
        raise DatasetError(
            f"selection {selection_id!r} mixes base models {sorted(set(base_models.values()))}: "
            "one dataset is tokenized with one chat template (set filter.policy_lineage)"
        )
    return next(iter(base_models.values()))


def _examples(
    con: duckdb.DuckDBPyConnection, tokenizer: Any, accepted: list[dict], cfg: PipelineConfig
) -> tuple[list[dict], list[dict], int]:
    """Tokenized, masked examples: (kept, dropped as too long, boundary mismatches)."""
    dcfg = cfg.dataset
    kept: list[dict] = []
    dropped: list[dict] = []
    boundary_mismatches = 0
    traces = load_traces(con, [r["trajectory_id"] for r in accepted], subcalls=False)
    for r in accepted:
        msgs = root_messages(traces[r["trajectory_id"]], dcfg.context_distillation)
        flags = trained_flags(msgs)
        if not any(flags):
            raise DatasetError(
                f"trajectory {r['trajectory_id']}: the trace has no root completion to train on"
            )
        try:
            ex = tokenize_conversation(
                tokenizer, msgs, trained=flags, where=f"trajectory {r['trajectory_id']}"
            )
        except MaskingError as exc:
            raise DatasetError(str(exc)) from exc
        boundary_mismatches += not ex.segment_ids_match
        row = {
            "trajectory_id": r["trajectory_id"],
            "room_id": r["room_id"],
            "room_name": r["room_name"],
            "policy_id": r["policy_id"],
            "messages": [{"role": m["role"], "content": m["content"]} for m in msgs],
            "trained_messages": flags,
            "input_ids": ex.input_ids,
            "labels": ex.labels,
            "assistant_masks": ex.assistant_masks,
            "n_tokens": ex.n_tokens,
            "n_trained": ex.n_trained,
        }
        (dropped if ex.n_tokens > dcfg.max_length else kept).append(row)
    return kept, dropped, boundary_mismatches


def _stats(rows: list[dict]) -> dict[str, Any]:
    return token_stats([r["n_tokens"] for r in rows], [r["n_trained"] for r in rows])


def _filter_params(con: duckdb.DuckDBPyConnection, selection_id: str) -> Any:
    row = con.execute(
        "select params from selections where selection_id = ? limit 1", [selection_id]
    ).fetchone()
    params = row[0] if row else None
    return json.loads(params) if isinstance(params, str) else params


def _next_version(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("select coalesce(max(version), 0) + 1 from datasets").fetchone()[0])


def _hf_datasets(rows: dict[str, list[dict]]) -> Any:
    import datasets

    features = datasets.Features(
        {
            "trajectory_id": datasets.Value("string"),
            "room_id": datasets.Value("string"),
            "policy_id": datasets.Value("string"),
            "messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            # Per message: is it one of the root's own turns (trained)?
            "trained_messages": datasets.Sequence(datasets.Value("bool")),
            "input_ids": datasets.Sequence(datasets.Value("int32")),
            "labels": datasets.Sequence(datasets.Value("int32")),
            "assistant_masks": datasets.Sequence(datasets.Value("int8")),
            "n_tokens": datasets.Value("int32"),
            "n_trained": datasets.Value("int32"),
        }
    )
    # from_list cannot build an empty split with features; from_dict of empty columns can
    # (a one-room run has no validation room).
    return datasets.DatasetDict(
        {
            s: datasets.Dataset.from_list(rows[s], features=features)
            if rows[s]
            else datasets.Dataset.from_dict({k: [] for k in features}, features=features)
            for s in SPLITS
        }
    )


def _save(folder: Path, dataset_id: str, rows: dict[str, list[dict]], card: dict[str, Any]) -> None:
    """hf/, parquet/ and the card into ``folder``, all or nothing."""
    hf_rows = {s: [{k: v for k, v in r.items() if k != "room_name"} for r in rows[s]] for s in SPLITS}
    # Files first, into a sibling temp folder renamed into place: a killed run leaves no half dataset.
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dataset_id}.tmp-", dir=folder.parent))
    try:
        dsd = _hf_datasets(hf_rows)
        # One shard per split: an empty split (a run whose accepted trajectories share one room has no
        # validation room) would otherwise be saved as zero shards, which load_from_disk cannot read.
        dsd.save_to_disk(str(tmp / "hf"), num_shards={s: 1 for s in dsd})
        (tmp / "parquet").mkdir()
        for s in SPLITS:
            dsd[s].to_parquet(str(tmp / "parquet" / f"{s}.parquet"))
        write_card(tmp, card)
        if folder.exists():  # left by a run killed before it registered the dataset
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _register(
    con: duckdb.DuckDBPyConnection,
    card: dict[str, Any],
    folder: str,
    rows: dict[str, list[dict]],
    dropped: list[dict],
) -> None:
    """The dataset and its examples (per split, and the dropped ones) into the warehouse."""
    dataset_id = card["dataset_id"]
    examples = [
        {"dataset_id": dataset_id, "trajectory_id": r["trajectory_id"], "split": s, "n_tokens": r["n_tokens"]}
        for s in SPLITS
        for r in rows[s]
    ] + [
        {
            "dataset_id": dataset_id,
            "trajectory_id": r["trajectory_id"],
            "split": "dropped",
            "n_tokens": r["n_tokens"],
        }
        for r in dropped
    ]
    with db.transaction(con):
        con.execute("delete from dataset_examples where dataset_id = ?", [dataset_id])
        con.execute("delete from datasets where dataset_id = ?", [dataset_id])
        db.write_rows(
            con,
            "datasets",
            [
                {
                    "dataset_id": dataset_id,
                    "selection_id": card["selection_id"],
                    "version": card["version"],
                    "path": folder,
                    "n_train": len(rows["train"]),
                    "n_validation": len(rows["validation"]),
                    "n_dropped_too_long": len(dropped),
                    "card": card,
                    "created_at": db.now(),
                }
            ],
        )
        db.write_rows(con, "dataset_examples", examples)
