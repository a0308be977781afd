"""Cost: prices in config, USD in the marts and the funnel, the report's cost section and its two plots."""

from __future__ import annotations

import shutil
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from pipeline import db
from pipeline.cli import main
from pipeline.config import ConfigError, load_config
from pipeline.costs import price_rows
from pipeline.evaluation import mart_in_rooms

PRICES = {"root": (3.0, 15.0), "subagent": (0.5, 2.0)}


def _recipe(path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "models": {
                    "root": {"kind": "local", "usd_per_mtok_in": PRICES["root"][0], "usd_per_mtok_out": PRICES["root"][1]},
                    "subagent": {"kind": "extractive", "usd_per_mtok_in": PRICES["subagent"][0],
                                 "usd_per_mtok_out": PRICES["subagent"][1]},
                }
            }
        )
    )  # fmt: skip
    return path


def test_prices_are_typed_config_and_default_to_zero(tmp_path):
    cfg = load_config(_recipe(tmp_path / "priced.yaml"))
    rows = {r["model"]: r for r in price_rows(cfg)}
    assert (
        rows["smollm2-135m-instruct"]["usd_per_mtok_out"] == 15.0 and rows["extractive"]["role"] == "subagent"
    )
    assert all(r["usd_per_mtok_in"] == 0 for r in price_rows(load_config(None)))
    with pytest.raises(ConfigError, match="usd_per_mtok"):
        load_config(None, ["models.root.usd_per_mtok=1"])
    with pytest.raises(ConfigError, match="expected a number"):
        load_config(None, ["models.root.usd_per_mtok_in=cheap"])


@pytest.mark.slow
def test_embedded_models_cost_zero_and_say_so(world):
    cfg, out = world
    md = (out / "report.md").read_text()
    cost = md.split("## Cost", 1)[1].split("\n## ", 1)[0]
    assert "priced at 0 USD" in cost and "embedded models" in cost
    assert "(score_vs_cost.png)" in cost and "(root_token_share.png)" in cost
    with closing(db.connect(cfg.run.db_path, read_only=True)) as con:
        assert con.execute("select max(cost_usd), count(*) from trajectory_scores").fetchone()[0] == 0
        # evaluate reads the marts under CTEs that shadow trajectory_scores: the cost columns must bind there too
        rooms = [r for (r,) in con.execute("select distinct room_id from trajectories").fetchall()]
        (pid,) = con.execute("select any_value(policy_id) from trajectories").fetchone()
        for mart in ("policy_summary", "room_policy_summary"):
            rows = mart_in_rooms(con, mart, rooms, "policy_id = $pid and purpose = 'eval'", {"pid": pid})
            assert rows and all(r["cost_usd"] == 0 for r in rows)


@pytest.mark.slow
def test_priced_run_costs_tokens_times_prices(world, tmp_path, capsys):
    cfg, _ = world
    run = shutil.copytree(cfg.run.dir, tmp_path / "run")
    assert main(["--recipe", str(_recipe(tmp_path / "priced.yaml")), "report", f"run.dir={run}"]) == 0
    with closing(db.connect(run / "pipeline.duckdb", read_only=True)) as con:
        raw = {
            tid: (rp * PRICES["root"][0] + rc * PRICES["root"][1]) / 1e6
            for tid, rp, rc in con.execute(
                "select trajectory_id, root_prompt_tokens, root_completion_tokens from trajectories"
            ).fetchall()
        }
        for tid, sp, sc in con.execute(
            "select trajectory_id, sum(prompt_tokens), sum(completion_tokens) from subcalls group by all"
        ).fetchall():
            raw[tid] += (sp * PRICES["subagent"][0] + sc * PRICES["subagent"][1]) / 1e6
        marts = dict(con.execute("select trajectory_id, cost_usd from trajectory_scores").fetchall())
        assert marts.keys() == raw.keys() and all(v > 0 for v in marts.values())
        assert all(marts[t] == pytest.approx(raw[t]) for t in raw)
        sel, accepted, per = con.execute(
            "select selection_id, accepted, cost_per_accepted_usd from rejection_funnel where room_id = ''"
        ).fetchone()
        spent = con.execute(
            "select sum(cost_usd) from trajectory_scores join selections using (trajectory_id) where selection_id = ?",
            [sel],
        ).fetchone()[0]
    assert accepted > 0 and per == pytest.approx(spent / accepted)
    md = (run / "report" / "report.md").read_text()
    cost = md.split("## Cost", 1)[1].split("\n## ", 1)[0]
    assert "priced at 0 USD" not in cost and "| smollm2-135m-instruct | root | 3.0000 | 15.0000 |" in cost
    assert f"{per:.4f} |" in md.split("## Rejection filter", 1)[1]
    assert (run / "report" / "score_vs_cost.png").exists() and (
        run / "report" / "root_token_share.png"
    ).exists()
