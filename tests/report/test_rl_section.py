"""The report's RL section: reward per step with its band from the mart, and the reward-vs-held-out warning."""

from __future__ import annotations

from pipeline import db
from pipeline.report import data, sections
from pipeline.report.render import Image, Table


def _warehouse(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    now = db.now()
    db.write_rows(con, "rl_runs", [{
        "rl_id": "rl-1", "start_policy_id": "base-1", "policy_id": "sft-rl", "config_hash": "h",
        "generation": "in_process", "adapter_path": "adapters/rl-1", "status": "ok", "started_at": now,
    }])  # fmt: skip
    steps = []
    for step, (mean, std) in enumerate([(0.2, 0.1), (0.4, 0.2)], start=1):
        steps.append({
            "rl_id": "rl-1", "step": step, "sampling_policy_id": "base-1", "n_rollouts": 4,
            "reward_mean": mean, "reward_std": std, "reward_min": 0.0, "reward_max": 1.0,
            "zero_advantage_share": 0.5, "loss": 0.1, "grad_norm": 1.0, "tokens": 100, "trained_tokens": 10,
            "n_copied": step - 1, "n_over_budget": 0, "rollout_s": 10.0 * step, "grade_s": 0.1, "sync_s": 0.2,
            "update_s": 5.0, "finished_at": now,
        })  # fmt: skip
    steps[0] |= {"reward_ci_low": 0.05, "reward_ci_high": 0.35}
    db.write_rows(con, "rl_steps", steps)
    return con


def test_band_and_the_reward_rising_while_heldout_falls(tmp_path):
    con = _warehouse(tmp_path)
    try:
        by_run = data.rl_steps(con)
    finally:
        con.close()
    rows = by_run["rl-1"]
    # A step recorded without its interval: the 95% normal band of the mean, mean +- 1.96 sd / sqrt(n)
    assert abs(rows[1]["reward_band_low"] - (0.4 - 1.96 * 0.2 / 2)) < 1e-9
    # A step recorded with its interval (what `pipeline rl` prints): the stored one
    assert (rows[0]["reward_band_low"], rows[0]["reward_band_high"]) == (0.05, 0.35)
    eval_rows = [{"policy_id": "sft-rl", "metric": "lift", "value": -0.05, "ci_low": -0.1, "ci_high": 0.0}]
    section, png = sections.rl_section({}, by_run, eval_rows, tmp_path)
    assert png is not None and png.exists()
    assert any(isinstance(b, Image) for b in section.blocks)
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert [r[table.headers.index("copied memos")] for r in table.rows] == ["0", "1"]  # the copied-memo watch
    text = " ".join(b for b in section.blocks if isinstance(b, str))
    assert "reward rose while the held-out score fell" in text
    assert sections.rl_section({}, {}, [], tmp_path) == (None, None)


def test_before_and_after_table_reads_the_evaluation_of_start_and_rl_policy(tmp_path):
    con = _warehouse(tmp_path)
    try:
        by_run = data.rl_steps(con)
    finally:
        con.close()

    def row(pid, metric, value):
        return {"policy_id": pid, "base_policy_id": "base-1", "metric": metric, "value": value,
                "ci_low": value - 0.1, "ci_high": value + 0.1, "n_rooms": 3}  # fmt: skip

    eval_rows = [row("base-1", "score", 0.5), row("base-1", "coverage", 0.6), row("sft-rl", "score", 0.7),
                 row("sft-rl", "coverage", 0.9), row("sft-rl", "lift", 0.2)]  # fmt: skip
    section, _ = sections.rl_section({"base-1": "base", "sft-rl": "RL"}, by_run, eval_rows, tmp_path)
    (table,) = [b for b in section.blocks if isinstance(b, Table) and b.headers[0] == "held-out"]
    assert table.headers[1:] == ["start: base", "after RL: RL"]
    got = {r[0]: r[1:] for r in table.rows}
    assert got["score"][0].startswith("50") and got["score"][1].startswith("70")
    assert got["coverage"][0].startswith("60") and got["coverage"][1].startswith("90")
    # an evaluation without the RL policy gives no before/after table
    section, _ = sections.rl_section({}, by_run, eval_rows[:2], tmp_path)
    assert not [b for b in section.blocks if isinstance(b, Table) and b.headers[0] == "held-out"]


def test_rl_policies_are_labelled_rl(tmp_path):
    from pipeline.policies import Policy, register_policy

    con = db.connect(tmp_path / "w.duckdb")
    try:
        start = Policy(base_model="m", backend="local", prompt="p", harness="rlm")
        step = Policy("m", "local", "p", "rlm", adapter="adapters/rl-1/steps/step-1", parent_id=start.policy_id,
                      train_id="rl-1")  # fmt: skip
        final = Policy(
            "m", "local", "p", "rlm", adapter="adapters/rl-1", parent_id=start.policy_id, train_id="rl-1"
        )
        for p in (start, step, final):
            register_policy(con, p)
        labels = data.policy_labels(con)
    finally:
        con.close()
    assert final.policy_id.startswith("grpo-") and step.policy_id.startswith("grpo-")
    assert labels[final.policy_id] == "RL" and labels[step.policy_id] == "RL step 1 (rl-1)"
    assert labels[start.policy_id] == "base"


def test_known_answer_scale_of_the_runs_rooms(tmp_path):
    """The RL section puts the run's best mean reward beside the known-answer memos of the run's own rooms."""
    from pipeline.report.known_answers import known_answer_scale
    from pipeline.rooms import store
    from pipeline.rooms.synthetic.generator import generate_room

    con = _warehouse(tmp_path)
    try:
        store.save_room(con, generate_room("rl-room", seed=4, n_documents=6, tokens_per_document=200))
        db.write_rows(con, "rl_rollouts", [
            {"rl_id": "rl-1", "step": 1, "slot": s, "room_id": "rl-room", "trajectory_id": f"t{s}", "reward": 0.1}
            for s in range(2)
        ])  # fmt: skip
        rooms = data.rl_rooms(con)
        scale = {rl_id: known_answer_scale(con, names) for rl_id, names in rooms.items()}
        by_run = data.rl_steps(con)
    finally:
        con.close()
    assert rooms == {"rl-1": ["rl-room"]}
    assert scale["rl-1"]["oracle"] > 0.9 and scale["rl-1"]["dump"] < 0.1
    section, _ = sections.rl_section({}, by_run, [], tmp_path, scale)
    (table,) = [b for b in section.blocks if isinstance(b, Table) and b.headers[0] == "memo"]
    got = dict(table.rows)
    assert got["rl-1: best step's mean reward"] == "0.40"  # the better of the two steps' means
    assert set(scale["rl-1"]) <= set(got)
