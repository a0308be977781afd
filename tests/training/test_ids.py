"""The training chain's ids keep the values earlier versions wrote (now derived via pipeline.ids).

Each expected value is computed the way the stages computed it before the ids
moved to pipeline.ids, so a warehouse built then still finds its selections,
datasets and train runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from pipeline.config import PipelineConfig
from pipeline.training import dataset, plan, selection


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_selection_id_is_unchanged():
    p = dataclasses.asdict(PipelineConfig().filter)
    decisions = [("traj-b", "score"), ("traj-a", "accepted")]
    key = json.dumps({"params": p, "decisions": decisions}, sort_keys=True)
    assert selection.selection_id_for(p, decisions) == "sel-" + _sha(key)[:12]


def test_dataset_config_hash_and_id_are_unchanged():
    cfg = PipelineConfig()
    cfg.dataset.selection_id = "sel-ignored"  # the selection choice is not part of the config hash
    d = dict(vars(cfg.dataset))
    d.pop("selection_id")
    blob = json.dumps({"dataset": d, "seed": cfg.run.seed}, sort_keys=True, default=str)
    assert dataset.config_hash(cfg) == _sha(blob)[:16]
    assert dataset.dataset_id_for("sel-1", "abc") == "ds-" + _sha("sel-1\0abc")[:12]


def test_room_split_order_is_unchanged():
    rooms = [f"room-{i}" for i in range(7)]
    ordered = sorted(rooms, key=lambda r: _sha(f"5:{r}"))
    train, val = dataset.split_rooms(rooms, 0.3, seed=5)
    assert val == sorted(ordered[:3]) and train == sorted(set(rooms) - set(val))


def test_train_config_hash_and_id_are_unchanged():
    cfg = PipelineConfig()
    t = dataclasses.asdict(cfg.train)
    t.pop("dataset_id", None)
    blob = json.dumps({"train": t, "seed": cfg.run.seed}, sort_keys=True, default=str)
    assert plan.config_hash(cfg) == _sha(blob)[:16]
    assert plan.train_id_for("ds-1", "abc") == "train-" + _sha("ds-1\0abc")[:12]
