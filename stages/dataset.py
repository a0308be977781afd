"""Dataset stage: accepted trajectories -> a chat-format Hugging Face dataset with root-only loss masks.

Run: ``python -m pipeline --recipe <recipe> dataset`` (or ``stages.dataset.run(cfg)``).

Each accepted trajectory of the selection (``dataset.selection_id``, default
the newest selection) becomes one example: the root's own conversation —
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
and is registered in ``datasets`` + ``dataset_examples``. The same selection
and dataset config again finds the registered dataset and does nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.harness.trace import Trace
from pipeline.policies import load_policy
from pipeline.trace_store import load_traces
from pipeline.training import base_model_path
from pipeline.training.card import token_stats, write_card
from pipeline.training.masking import MaskingError, tokenize_conversation, trained_flags

SPLITS = ("train", "validation")


class DatasetError(RuntimeError):
    """The dataset stage cannot build a dataset from what the warehouse holds."""

    user_facing = True  # the CLI prints the message and exits 1


class NoSelectionError(DatasetError):
    """No selection to build from (the filter stage has not run, or dataset.selection_id is wrong)."""


class NoAcceptedTrajectories(DatasetError):
    """The selection accepted nothing (or nothing that fits dataset.max_length)."""


def resolve_selection(con, selection_id: str = "") -> str:
    if selection_id:
        n = con.execute("select count(*) from selections where selection_id = ?", [selection_id]).fetchone()[
            0
        ]
        if not n:
            raise NoSelectionError(f"dataset.selection_id: no selection {selection_id!r} in the warehouse")
        return selection_id
    row = con.execute(
        "select selection_id from selections group by selection_id order by max(created_at) desc, selection_id desc limit 1"
    ).fetchone()
    if row is None:
        raise NoSelectionError("no selection in the warehouse: run the filter stage first")
    return row[0]


def config_hash(cfg: PipelineConfig) -> str:
    """Hash of what shapes the examples: the dataset section less the selection choice, and the seed."""
    d = dict(vars(cfg.dataset))
    d.pop("selection_id", None)
    blob = json.dumps({"dataset": d, "seed": cfg.run.seed}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def dataset_id_for(selection_id: str, chash: str) -> str:
    return "ds-" + hashlib.sha256(f"{selection_id}\0{chash}".encode()).hexdigest()[:12]


def split_rooms(rooms: list[str], val_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic room split: rooms ordered by a seeded hash, the first share goes to validation.

    With two or more rooms validation gets at least one and train keeps at least one.
    """
    rooms = sorted(set(rooms))
    if len(rooms) < 2:
        return rooms, []
    ordered = sorted(rooms, key=lambda r: hashlib.sha256(f"{seed}:{r}".encode()).hexdigest())
    n_val = min(len(rooms) - 1, max(1, math.ceil(val_fraction * len(rooms))))
    val = sorted(ordered[:n_val])
    return sorted(set(rooms) - set(val)), val


def root_messages(trace: Trace, context_distillation: bool) -> list[dict[str, Any]]:
    """The root's conversation; worked examples removed when distilling the context away."""
    msgs = [dict(m) for m in trace.messages()]
    if context_distillation:
        msgs = [m for m in msgs if not m.get("example", False)]
    return msgs


def _load_accepted(con, selection_id: str) -> list[dict]:
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


def _next_version(con) -> int:
    return int(con.execute("select coalesce(max(version), 0) + 1 from datasets").fetchone()[0])


def _hf_datasets(rows: dict[str, list[dict]]):
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


def run(cfg: PipelineConfig) -> dict:
    con = db.connect(cfg.run.db_path, lock_timeout_s=cfg.run.lock_timeout_s)
    try:
        chash = config_hash(cfg)
        with db.stage_run(con, "dataset", chash) as counts:
            counts.update(build(con, cfg, chash))
        return counts
    finally:
        con.close()


def build(con, cfg: PipelineConfig, chash: str) -> dict:
    dcfg = cfg.dataset
    selection_id = resolve_selection(con, dcfg.selection_id)
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

    # One tokenizer per base model; the base model comes from the policy that sampled each trajectory.
    policy_ids = Counter(r["policy_id"] for r in accepted)
    base_models = {pid: load_policy(con, pid).base_model for pid in policy_ids}
    if len(set(base_models.values())) > 1:
        raise DatasetError(
            f"selection {selection_id!r} mixes base models {sorted(set(base_models.values()))}: "
            "one dataset is tokenized with one chat template (set filter.policy_lineage)"
        )
    base_model = next(iter(base_models.values()))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_model_path(base_model))

    kept: list[dict] = []
    dropped: list[dict] = []
    boundary_mismatches = 0
    traces = load_traces(con, [r["trajectory_id"] for r in accepted], subcalls=False)
    for r in accepted:
        trace = traces[r["trajectory_id"]]
        msgs = root_messages(trace, dcfg.context_distillation)
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
    hf_rows = {s: [{k: v for k, v in r.items() if k != "room_name"} for r in rows[s]] for s in SPLITS}

    # A registered dataset whose folder went missing is rebuilt under its own version.
    version = existing[0]["version"] if existing else _next_version(con)
    params_row = con.execute(
        "select params from selections where selection_id = ? limit 1", [selection_id]
    ).fetchone()
    filter_params = params_row[0] if params_row else None
    if isinstance(filter_params, str):
        filter_params = json.loads(filter_params)
    card = {
        "dataset_id": dataset_id,
        "version": version,
        "source": {"run_dir": str(cfg.run.dir), "db_path": str(cfg.run.db_path)},
        "selection_id": selection_id,
        "filter_params": filter_params,
        "config_hash": chash,
        "config": {"dataset": dict(vars(dcfg))},
        "context_distillation": dcfg.context_distillation,
        "masking": "loss on the root's own completions and their end-of-turn token; system, task, "
        "REPL output and worked-example tokens are -100",
        "tokenizer": {
            "base_model": base_model,
            "chat_template_sha256": hashlib.sha256((tokenizer.chat_template or "").encode()).hexdigest()[:16],
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
        "token_stats": {
            s: token_stats([r["n_tokens"] for r in rows[s]], [r["n_trained"] for r in rows[s]])
            for s in SPLITS
        }
        | {"dropped": token_stats([r["n_tokens"] for r in dropped], [r["n_trained"] for r in dropped])},
        "trajectory_ids": {
            "train": [r["trajectory_id"] for r in rows["train"]],
            "validation": [r["trajectory_id"] for r in rows["validation"]],
            "dropped": [r["trajectory_id"] for r in dropped],
        },
    }

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
                    "selection_id": selection_id,
                    "version": version,
                    "path": str(folder),
                    "n_train": len(rows["train"]),
                    "n_validation": len(rows["validation"]),
                    "n_dropped_too_long": len(dropped),
                    "card": card,
                    "created_at": db.now(),
                }
            ],
        )
        db.write_rows(con, "dataset_examples", examples)
    return {
        "reused": False,
        "dataset_id": dataset_id,
        "version": version,
        "path": str(folder),
        "accepted": len(accepted),
        "train": len(rows["train"]),
        "validation": len(rows["validation"]),
        "dropped_too_long": len(dropped),
        "train_tokens": card["token_stats"]["train"]["tokens"],
    }
