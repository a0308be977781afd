"""The sample stage: complete trajectories in the warehouse, exactly k per pair after SIGKILLs."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pipeline import db
from pipeline.config import load_config
from stages import rooms

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path):
    cfg = load_config("tiny", [f"run.dir={tmp_path}", "rooms.n_rooms=2", "rooms.heldout_fraction=0.0"])
    rooms.run(cfg)
    return tmp_path


def _driver(run_dir) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("sample_driver.py")), str(run_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _workers() -> set[int]:
    out = set()
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "pipeline.harness.worker" in cmd:
            out.add(p.pid)
    return out


@pytest.mark.slow
def test_sigkill_and_resume_gives_exactly_k_per_pair(run_dir):
    before = _workers()
    rng = random.Random(0)
    for _ in range(3):
        proc = _driver(run_dir)
        time.sleep(rng.uniform(2.0, 5.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    proc = _driver(run_dir)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    con = db.connect(run_dir / "pipeline.duckdb")
    per_pair = con.execute(
        "select room_id, policy_id, count(*), count(distinct sample_index) from trajectories group by all"
    ).fetchall()
    assert len(per_pair) == 2
    assert all(n == 5 and d == 5 for _, _, n, d in per_pair), per_pair
    for child in ("turns", "subcalls", "coverage"):
        orphans = con.execute(
            f"select count(*) from {child} c where not exists "
            f"(select 1 from trajectories t where t.trajectory_id = c.trajectory_id)"
        ).fetchone()[0]
        assert orphans == 0, child
    # every trajectory is whole: its turns and coverage rows are there
    incomplete = con.execute(
        "select count(*) from trajectories t where n_turns <> "
        "(select count(*) from turns u where u.trajectory_id = t.trajectory_id) "
        "or not exists (select 1 from coverage c where c.trajectory_id = t.trajectory_id)"
    ).fetchone()[0]
    assert incomplete == 0
    statuses = dict(con.execute("select status, count(*) from trajectories group by 1").fetchall())
    assert statuses.get("submitted", 0) == 10, statuses
    assert (
        con.execute("select min(n_subcalls) from trajectories").fetchone()[0] == 20
    )  # one call per document
    time.sleep(1.0)
    assert not (_workers() - before), "REPL workers outlived a killed sampler"


@pytest.mark.slow
def test_sampled_trajectories_graded_with_hand_checked_coverage(run_dir):
    """Sample + grade on tiny rooms: the program reads every document, so coverage is 1.0 by construction."""
    proc = _driver(run_dir)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    from stages import grade

    cfg = load_config("tiny", [f"run.dir={run_dir}"])
    grade.run(cfg)
    con = db.connect(run_dir / "pipeline.duckdb")
    rows = con.execute(
        "select coverage, subagent_coverage, root_coverage, score, recall, n_criteria from trajectory_scores"
    ).fetchall()
    assert len(rows) == 10
    for cov, sub_cov, root_cov, score, recall, n_criteria in rows:
        assert cov == 1.0 and sub_cov == 1.0  # every document was sent whole to a subagent
        assert root_cov < 1.0  # the root itself only saw counts
        assert n_criteria > 0 and 0.0 <= score <= 1.0 and 0.0 < recall < 1.0
    # recompute one trajectory's scores by hand with the reference judge
    from pipeline.grading.reference import ReferenceGrader
    from pipeline.rooms import store

    tid, room_id, memo = con.execute(
        "select trajectory_id, room_id, memo from trajectories limit 1"
    ).fetchone()
    expected = ReferenceGrader(store.load_room(con, room_id)).grade(memo)
    got = con.execute(
        "select score, recall, precision from trajectory_scores where trajectory_id = ?", [tid]
    ).fetchone()
    assert got == pytest.approx((expected.headline, expected.recall, expected.precision))


@pytest.fixture
def fresh_ray():
    """Ray keeps one instance per process, with the environment it started with: start each test anew."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install -e '.[ray]')")
    ray.shutdown()
    yield
    ray.shutdown()


@pytest.mark.slow
def test_ray_executor_produces_the_same_rows(run_dir, tmp_path, fresh_ray):
    """sample.executor=ray on a local Ray instance: same trajectories as the local executor."""
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install -e '.[ray]')")
    from pipeline.config import load_config
    from stages import sample
    from tests.stages import sample_driver

    os.environ["PYTHONPATH"] = str(ROOT)
    cfg = load_config(
        "tiny", [f"run.dir={run_dir}", *sample_driver.OVERRIDES, "sample.executor=ray", "sample.k=2"]
    )
    counts = sample.run(cfg)
    assert counts["sampled"] == 4 and counts["failed"] == 0
    con = db.connect(run_dir / "pipeline.duckdb")
    rows = con.execute("select status, n_subcalls from trajectories").fetchall()
    assert rows == [("submitted", 20)] * 4
    assert con.execute("select count(*) from coverage").fetchone()[0] > 0


@pytest.mark.slow
def test_ray_worker_that_dies_loses_nothing(run_dir, tmp_path, fresh_ray):
    """A Ray worker process killed mid-trajectory: the task is retried, every pair still gets k."""
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install -e '.[ray]')")
    from pipeline.config import load_config
    from stages import sample
    from tests.stages import sample_driver

    marker = tmp_path / "died"
    os.environ["RLM_TEST_DIE_MARKER"] = str(marker)
    os.environ["PYTHONPATH"] = str(ROOT)
    overrides = [o for o in sample_driver.OVERRIDES if not o.startswith("models.root.model")]
    cfg = load_config(
        "tiny",
        [
            f"run.dir={run_dir}",
            *overrides,
            "models.root.model=dies_once",
            "sample.executor=ray",
            "sample.k=2",
        ],
    )
    counts = sample.run(cfg)
    assert marker.exists()  # a worker did die
    assert counts["sampled"] == 4 and counts["failed"] == 0
    con = db.connect(run_dir / "pipeline.duckdb")
    per_pair = con.execute(
        "select room_id, count(*), count(distinct sample_index) from trajectories group by all"
    ).fetchall()
    assert sorted(n for _, n, _ in per_pair) == [2, 2] and all(n == d for _, n, d in per_pair)
    assert con.execute("select count(*) from trajectories where status = 'submitted'").fetchall()[0][0] == 4
