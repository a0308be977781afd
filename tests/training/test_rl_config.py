"""RL settings that cannot work fail with one line naming the key; the generation mode follows the backend."""

from __future__ import annotations

import pytest

from pipeline import db
from pipeline.config import ConfigError, load_config
from pipeline.policies import base_policy
from pipeline.training.rl import check_config, config_hash, generation_mode


def test_bad_rl_settings_name_their_key():
    with pytest.raises(ConfigError, match="rl.rollouts_per_step"):
        check_config(load_config("tiny", ["rl.rollouts_per_step=3", "rl.num_generations=2"]))
    with pytest.raises(ConfigError, match="rl.num_generations"):
        check_config(load_config("tiny", ["rl.num_generations=1"]))
    with pytest.raises(ConfigError, match="micro_batch"):
        check_config(load_config("tiny", ["rl.micro_batch=3"]), num_processes=1)
    with pytest.raises(ConfigError, match="unknown key 'rl.stepz'"):
        load_config("tiny", ["rl.stepz=3"])
    cfg = load_config("tiny", ["rl.generation=gpu"])
    with pytest.raises(ConfigError, match="rl.generation"):
        generation_mode(cfg, base_policy(cfg))
    cfg = load_config("tiny", ["rl.generation=server"])  # the tiny root has no server
    with pytest.raises(ConfigError, match="models.root.base_url"):
        generation_mode(cfg, base_policy(cfg))


def test_generation_mode_and_resumable_hash():
    tiny, default = load_config("tiny"), load_config("default")
    assert generation_mode(tiny, base_policy(tiny)) == "in_process"  # local root: the trainer's own model
    assert generation_mode(default, base_policy(default)) == "server"  # vLLM root: LoRA modules per step
    # More steps continue the same run; a different learning rate is another run.
    assert config_hash(load_config("tiny", ["rl.steps=9"])) == config_hash(tiny)
    assert config_hash(load_config("tiny", ["rl.learning_rate=0.5"])) != config_hash(tiny)
    # The update savings change which passes run and how they are laid out, not the update.
    same = ["rl.pack_shared_prefix=false", "rl.skip_flat_groups=false"]
    assert config_hash(load_config("tiny", same)) == config_hash(tiny)


def test_nightly_method_is_sft_or_rl(tmp_path):
    from stages import nightly

    with pytest.raises(ConfigError, match="nightly.method"):
        nightly.run(load_config("tiny", [f"run.dir={tmp_path}", "nightly.method=ppo"]))


def test_reward_is_the_headline_unless_the_coverage_term_is_on(tmp_path):
    from pipeline import db
    from pipeline.training.room_rollouts import reward, rollout_scores

    con = db.connect(tmp_path / "w.duckdb")
    try:
        now = db.now()
        grade = dict(judge="reference", recall=0.5, precision=1.0, n_claims=1, n_false_claims=0, traps_failed=0,
                     memo_words=10, budget_words=600, cut=False, quoted_words=0, graded_at=now)  # fmt: skip
        db.write_rows(con, "memo_scores", [
            {"trajectory_id": "t1", "grader_version": 2, "headline": 0.2, **grade},
            {"trajectory_id": "t1", "grader_version": 3, "headline": 0.6, **grade},  # the newest grade counts
            {"trajectory_id": "t2", "grader_version": 3, "headline": 0.4, **grade},
        ])  # fmt: skip
        db.write_rows(con, "coverage", [
            {"trajectory_id": "t1", "scope": "all", "grouping": "total", "group_value": "", "n_probes": 10, "n_seen": 5},
            {"trajectory_id": "t1", "scope": "root", "grouping": "total", "group_value": "", "n_probes": 10, "n_seen": 1},
        ])  # fmt: skip
        scores = rollout_scores(con, ["t1", "t2", "t3"])
    finally:
        con.close()
    assert set(scores) == {"t1", "t2"}  # t3 was never graded
    assert scores["t1"]["headline"] == 0.6 and scores["t1"]["coverage"] == 0.5
    assert scores["t2"]["coverage"] is None
    assert reward(scores["t1"]) == 0.6  # default: the judge's headline alone
    assert reward(scores["t1"], coverage_weight=0.5) == 0.6 + 0.25
    assert reward(scores["t2"], coverage_weight=0.5) == 0.4  # no coverage measured: no bonus
    assert reward({}, coverage_weight=0.5) == 0.0  # never graded: no reward
    with pytest.raises(ConfigError, match="rl.coverage_weight"):
        check_config(load_config("tiny", ["rl.coverage_weight=-1"]))


def _trajectory(tid: str, memo_turn: int, last_subcall_turn: int | None) -> dict:
    zero = dict.fromkeys(
        ("n_subcalls", "root_prompt_tokens", "root_completion_tokens", "sub_prompt_tokens",
         "sub_completion_tokens", "delegated_chars", "memo_chars", "n_findings", "n_findings_carried"),
        0,
    )  # fmt: skip
    return {
        "trajectory_id": tid, "room_id": "r", "policy_id": "p", "sample_index": 0, "purpose": "rl",
        "harness": "rlm", "status": "submitted", "n_turns": 3, "wall_s": 1.0, "started_at": db.now(),
        "trace": "{}", "memo_turn": memo_turn, "last_subcall_turn": last_subcall_turn, **zero,
    }  # fmt: skip


def test_overlap_term_pays_a_good_memo_begun_while_subagents_read(tmp_path):
    from pipeline.training.rl import config_hash
    from pipeline.training.room_rollouts import reward, rollout_scores

    con = db.connect(tmp_path / "w.duckdb")
    try:
        grade = dict(judge="reference", grader_version=3, recall=0.5, precision=1.0, n_claims=1, n_false_claims=0,
                     traps_failed=0, memo_words=10, budget_words=600, cut=False, quoted_words=0, graded_at=db.now())  # fmt: skip
        db.write_rows(con, "memo_scores", [
            {"trajectory_id": "early", "headline": 0.5, **grade},
            {"trajectory_id": "late", "headline": 0.5, **grade},
            {"trajectory_id": "early-empty", "headline": 0.0, **grade},
        ])  # fmt: skip
        db.write_rows(con, "trajectories", [
            _trajectory("early", memo_turn=1, last_subcall_turn=2),  # memo begun in turn 1, answers back in 2
            _trajectory("late", memo_turn=2, last_subcall_turn=2),  # one cell delegates, then submits
            _trajectory("early-empty", memo_turn=0, last_subcall_turn=2),
        ])  # fmt: skip
        scores = rollout_scores(con, ["early", "late", "early-empty"])
    finally:
        con.close()
    assert scores["early"]["memo_before_delegation_done"] is True
    assert scores["late"]["memo_before_delegation_done"] is False
    assert reward(scores["early"]) == reward(scores["late"]) == 0.5  # off by default
    assert reward(scores["early"], overlap_weight=0.2) == pytest.approx(0.6)
    assert reward(scores["late"], overlap_weight=0.2) == 0.5
    # Text begun early that the judge does not pay earns nothing from the term.
    assert reward(scores["early-empty"], overlap_weight=0.2) == 0.0
    with pytest.raises(ConfigError, match="rl.overlap_weight"):
        check_config(load_config("tiny", ["rl.overlap_weight=-0.1"]))
    # Off, the term leaves the run's identity as it was; on, it is another run.
    tiny = load_config("tiny")
    assert config_hash(load_config("tiny", ["rl.overlap_weight=0"])) == config_hash(tiny)
    assert config_hash(load_config("tiny", ["rl.overlap_weight=0.2"])) != config_hash(tiny)


def test_cost_term_charges_a_rollout_its_priced_tokens(tmp_path):
    from pipeline.training.rl import config_hash
    from pipeline.training.room_rollouts import reward, rollout_scores

    con = db.connect(tmp_path / "w.duckdb")
    try:
        grade = dict(judge="reference", grader_version=3, recall=0.5, precision=1.0, n_claims=1, n_false_claims=0,
                     traps_failed=0, memo_words=10, budget_words=600, cut=False, quoted_words=0, graded_at=db.now())  # fmt: skip
        db.write_rows(
            con, "memo_scores", [{"trajectory_id": t, "headline": 0.5, **grade} for t in ("dear", "cheap")]
        )
        db.write_rows(
            con, "trajectories", [_trajectory(t, memo_turn=2, last_subcall_turn=1) for t in ("dear", "cheap")]
        )
        call = dict(call_index=0, turn_index=0, depth=1, parent_call=None, model="reader", prompt="p", response="r",
                    error=None, completion_tokens=0, latency_s=0.1, issued_s=0.0, returned_s=0.1)  # fmt: skip
        db.write_rows(con, "subcalls", [
            {**call, "trajectory_id": "dear", "prompt_tokens": 20000},
            {**call, "trajectory_id": "cheap", "prompt_tokens": 2000},
        ])  # fmt: skip
        db.write_rows(con, "model_prices", [
            {"model": "reader", "role": "subagent", "usd_per_mtok_in": 5.0, "usd_per_mtok_out": 5.0,
             "recorded_at": db.now()}
        ])  # fmt: skip
        scores = rollout_scores(con, ["dear", "cheap"])
    finally:
        con.close()
    assert scores["dear"]["cost_usd"] == pytest.approx(0.1) and scores["cheap"]["cost_usd"] == pytest.approx(
        0.01
    )
    assert reward(scores["dear"]) == reward(scores["cheap"]) == 0.5  # off by default
    assert reward(scores["dear"], cost_weight=1.0) == pytest.approx(0.4)
    assert reward(scores["cheap"], cost_weight=1.0) == pytest.approx(0.49)
    with pytest.raises(ConfigError, match="rl.cost_weight"):
        check_config(load_config("tiny", ["rl.cost_weight=-1"]))
    tiny = load_config("tiny")
    assert config_hash(load_config("tiny", ["rl.cost_weight=0"])) == config_hash(tiny)
    assert config_hash(load_config("tiny", ["rl.cost_weight=1"])) != config_hash(tiny)
