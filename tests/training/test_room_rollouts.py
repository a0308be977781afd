"""A GRPO step's rollouts, without a model: failures, redo, replacement groups, the watch, the ratio.

The episode runner's sampling is replaced by a table of rewards (a test double of the harness and judge),
so these tests check the step's decisions; tests/serving/test_rl_vllm.py runs the whole step on the real
server.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from pipeline import db
from pipeline.config import ConfigError, load_config
from pipeline.harness.trace import Trace, Turn
from pipeline.training.importance import RatioStats, truncated_ratio
from pipeline.training.rl import _StepRecorder, check_config
from pipeline.training.room_rollouts import (
    REDO_SLOTS,
    REPLACEMENT_SLOTS,
    RLError,
    RLPlan,
    RoomRollouts,
    StepStats,
    _flat,
    _zero_advantage_share,
    failed_on_server,
)


def _trace(status, tokens, reason=""):
    t = Trace("t", "room", "p", status=status, end_reason=reason)
    t.turns = [Turn(0, [], "x", completion_tokens=tokens)]
    return t


def test_failed_on_server_is_no_token_or_the_servers_error():
    assert failed_on_server(None)
    assert failed_on_server(_trace("timeout", 0))
    assert failed_on_server(_trace("error", 12, "BackendError: smollm2 failed after 5 attempts"))
    assert not failed_on_server(_trace("timeout", 12))  # the policy ran out of time: its own doing
    assert not failed_on_server(_trace("error", 12, "root context limit: prompt too long"))
    assert not failed_on_server(_trace("submitted", 40))


def test_flat_groups_leave_failed_rollouts_out():
    assert _flat([0.5, 0.5]) and _flat([None, None]) and _flat([0.5, None])
    assert not _flat([0.5, None, 0.7])
    assert _zero_advantage_share([0.1, 0.1, 0.2, 0.3], 2) == 0.5


class _Table:
    """Stands in for episodes + judge: (room, attempt kind) -> rewards; 'fail' marks a failed rollout."""

    def __init__(self, rewards):
        self.rewards = rewards
        self.sampled: list[list[int]] = []

    def __call__(self, policy, rollouts, trainer):
        self.sampled.append([r.slot for r in rollouts])
        for r in rollouts:
            kind = (
                "replacement" if r.slot >= REPLACEMENT_SLOTS else "redo" if r.slot >= REDO_SLOTS else "first"
            )
            values = self.rewards[(r.room, kind)]
            value = values[r.slot % REDO_SLOTS % len(values)]
            r.failed = value == "fail"
            r.reward = 0.0 if r.failed else value
        return 0.0


def _runner(tmp_path, rewards, **rl):
    cfg = load_config("tiny", [f"run.dir={tmp_path}", *(f"rl.{k}={v}" for k, v in rl.items())])
    plan = RLPlan("rl-x", "h", None, "server", str(tmp_path / "a"), ["r0", "r1", "r2", "r3"], None)
    runner = RoomRollouts(None, cfg, plan, None)
    runner._sample = _Table(rewards)
    runner.recorded = []
    runner._record = lambda step, rollouts, trained: runner.recorded.append(
        ([r.slot for r in rollouts], trained)
    )
    return runner


def _batch(runner, rooms):
    return [runner._rollout(SimpleNamespace(policy_id="p"), 1, slot, room) for slot, room in enumerate(rooms)]


def test_a_flat_group_is_replaced_by_a_group_on_another_room_whose_rewards_differ(tmp_path):
    rewards = {
        ("r0", "first"): [0.3, 0.3],
        ("r1", "first"): [0.1, 0.4],
        ("r2", "replacement"): [0.2, 0.2],
        ("r3", "replacement"): [0.6, 0.1],
    }
    policy = SimpleNamespace(policy_id="p")
    # The stand-in room rotates with the step over the rooms not in the batch (r2, r3): step 1 draws r3.
    runner = _runner(tmp_path, rewards, max_replacement_groups=2)
    batch = _batch(runner, ["r0", "r0", "r1", "r1"])
    runner._sample(None, batch, None)
    assert runner._replace_flat_groups(policy, 1, batch, 2, None) == (1, 1)  # one flat group, one drawn
    assert [(r.room, r.reward) for r in batch] == [("r3", 0.6), ("r3", 0.1), ("r1", 0.1), ("r1", 0.4)]
    assert all(r.slot >= REPLACEMENT_SLOTS for r in batch[:2])
    assert ([0, 1], False) in runner.recorded  # the flat group it replaced stays on record, untrained
    # Step 2 draws r2, whose group is flat too: it is recorded untrained and the flat group stays.
    runner = _runner(tmp_path, rewards, max_replacement_groups=2)
    batch = _batch(runner, ["r0", "r0", "r1", "r1"])
    runner._sample(None, batch, None)
    assert runner._replace_flat_groups(policy, 2, batch, 2, None) == (1, 0)
    assert [r.room for r in batch] == ["r0", "r0", "r1", "r1"] and runner.recorded[-1][1] is False


def test_replacements_are_capped_and_off_at_zero(tmp_path):
    rewards = {("r0", "first"): [0.3, 0.3], ("r1", "first"): [0.2, 0.2]}
    runner = _runner(tmp_path, rewards, max_replacement_groups=0)
    batch = _batch(runner, ["r0", "r0", "r1", "r1"])
    runner._sample(None, batch, None)
    assert runner._replace_flat_groups(SimpleNamespace(policy_id="p"), 1, batch, 2, None) == (0, 0)
    rewards.update({("r2", "replacement"): [0.1, 0.9], ("r3", "replacement"): [0.1, 0.9]})
    runner = _runner(tmp_path, rewards, max_replacement_groups=1)
    batch = _batch(runner, ["r0", "r0", "r1", "r1"])
    runner._sample(None, batch, None)
    assert runner._replace_flat_groups(SimpleNamespace(policy_id="p"), 1, batch, 2, None) == (1, 1)


def test_failed_slots_are_sampled_again_and_too_many_failures_fail_the_step(tmp_path):
    rewards = {("r0", "first"): ["fail", 0.4], ("r0", "redo"): [0.5, 0.5]}
    runner = _runner(tmp_path, rewards)
    batch = _batch(runner, ["r0", "r0"])
    runner._sample(None, batch, None)
    n_redone, _ = runner._redo_failed(SimpleNamespace(policy_id="p"), 1, batch, None)
    assert n_redone == 1 and batch[0].slot == REDO_SLOTS and batch[0].reward == 0.5 and not batch[0].failed
    assert ([0], False) in runner.recorded  # the failed rollout is kept on record, not trained on

    rewards = {("r0", "first"): ["fail", 0.4], ("r0", "redo"): ["fail", 0.5]}
    runner = _runner(tmp_path, rewards, max_redo=2)
    batch = _batch(runner, ["r0", "r0"])
    runner._sample(None, batch, None)
    with pytest.raises(RLError, match=r"rl step 1: 1 of 2 rollouts failed on the root's server after 2 redo"):
        runner._redo_failed(SimpleNamespace(policy_id="p"), 1, batch, None)
    assert len(runner._sample.sampled) == 3  # the first batch and two redos


def test_a_share_of_failures_within_the_limit_is_trained_without_their_rewards(tmp_path):
    rewards = {("r0", "first"): ["fail"] + [0.4] * 3}
    runner = _runner(tmp_path, rewards)
    runner.cfg.evaluate.max_serving_failed = 0.3
    batch = _batch(runner, ["r0"] * 4)
    runner._sample(None, batch, None)
    assert runner._redo_failed(SimpleNamespace(policy_id="p"), 1, batch, None)[0] == 0
    assert batch[0].failed  # handed to TRL with reward None: no advantage, out of the baseline


def test_the_watch_flags_copies_budget_and_reward_jumps(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path}"])
    con = db.connect(tmp_path / "w.duckdb")
    plan = RLPlan("rl-x", "h", None, "server", str(tmp_path), [], None)
    con.execute(
        "insert into rl_steps (rl_id, step, sampling_policy_id, n_rollouts, reward_mean, finished_at) "
        "values ('rl-x', 1, 'p', 8, 0.1, now())"
    )
    rec = _StepRecorder(con, cfg, plan, None)
    stats = StepStats(
        2, "p", [0.5] * 8, 2, 0.0, n_copied=3, n_over_budget=0, rollout_s=0, grade_s=0, n_rollouts=8
    )
    flags = rec.watch(stats, 0.5)
    assert flags == ["copied memos 3/8 > 0.25", "reward jump +0.400 > 0.3"]
    stats.n_copied = 0
    assert rec.watch(stats, 0.2) == []
    con.close()


def test_truncated_ratio_caps_and_ignores_unknown_and_masked_tokens():
    trainer = torch.tensor([[-1.0, -1.0, -1.0, -2.0]])
    sampler = torch.tensor([[-1.0, -2.0, math.nan, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    ratio, raw = truncated_ratio(trainer, sampler, mask, cap=2.0)
    assert torch.allclose(
        ratio, torch.tensor([[1.0, 2.0, 1.0, 1.0]])
    )  # e^1 capped at 2; NaN -> 1; masked -> 1
    assert torch.allclose(raw, torch.tensor([1.0, math.e]))
    stats = RatioStats()
    stats.add(raw, 2.0)
    row = stats.row()
    assert row["ratio_clipped_share"] == 0.5 and abs(row["ratio_max"] - math.e) < 1e-6


def test_rl_refuses_a_nucleus_and_a_cap_below_one(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path}", "rl.top_p=0.9"])
    with pytest.raises(ConfigError, match="rl.top_p"):
        check_config(cfg)
    cfg = load_config("tiny", [f"run.dir={tmp_path}", "rl.importance_cap=0.5"])
    with pytest.raises(ConfigError, match="rl.importance_cap"):
        check_config(cfg)


def test_rollouts_sample_at_rl_temperature_when_set_and_the_trained_policy_keeps_its_own(tmp_path):
    from pipeline.policies import base_policy
    from pipeline.training.rl import grpo_config
    from pipeline.training.room_rollouts import rollout_sampling

    cfg = load_config("tiny", [f"run.dir={tmp_path}", "sampling.temperature=0.6", "sampling.top_p=0.9"])
    start = base_policy(cfg)
    assert rollout_sampling(cfg, start) == {**start.sampling, "top_p": 1.0}  # the start's temperature
    hot = load_config("tiny", [f"run.dir={tmp_path}", "sampling.temperature=0.6", "rl.temperature=1.0"])
    sampling = rollout_sampling(hot, base_policy(hot))
    assert sampling["temperature"] == 1.0 and sampling["top_p"] == 1.0
    assert base_policy(hot).sampling["temperature"] == 0.6  # the policy itself is evaluated as it was
    args = grpo_config(hot, str(tmp_path / "ckpt"), sampling=sampling)
    assert args.temperature == 1.0 and args.top_p == 1.0  # the loss scores what the server sampled
    for bad in ("0", "3.0"):
        with pytest.raises(ConfigError, match="rl.temperature"):
            check_config(load_config("tiny", [f"run.dir={tmp_path}", f"rl.temperature={bad}"]))
