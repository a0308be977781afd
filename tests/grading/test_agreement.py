"""Judge agreement report on a small hand-filled warehouse."""

from datetime import datetime

import pytest

from pipeline import db
from pipeline.grading.agreement import agreement_report, agreement_rows
from pipeline.stats import cohen_kappa


def _trajectory(tid: str, room: str) -> dict:
    return {
        "trajectory_id": tid,
        "room_id": room,
        "policy_id": "p0",
        "sample_index": int(tid[-1]),
        "purpose": "train",
        "harness": "rlm",
        "status": "submitted",
        "memo": "memo",
        "n_turns": 1,
        "n_subcalls": 0,
        "root_prompt_tokens": 1,
        "root_completion_tokens": 1,
        "sub_prompt_tokens": 0,
        "sub_completion_tokens": 0,
        "wall_s": 1.0,
        "delegated_chars": 0,
        "memo_chars": 4,
        "n_findings": 0,
        "n_findings_carried": 0,
        "started_at": datetime(2025, 1, 1),
        "trace": {},
    }


def _criterion(room: str, cid: str, kind: str) -> dict:
    return {
        "room_id": room,
        "criterion_id": cid,
        "kind": kind,
        "text": f"{kind} {cid}",
        "spec": {},
        "is_trap": False,
    }


def _grade(tid: str, cid: str, judge: str, passed: bool | None) -> dict:
    return {
        "trajectory_id": tid,
        "criterion_id": cid,
        "judge": judge,
        "passed": passed,
        "graded_at": db.now(),
    }


@pytest.fixture
def con(tmp_path):
    con = db.connect(tmp_path / "w.duckdb")
    # (trajectory, criterion, reference verdict, llm verdict); criterion ids repeat across rooms on purpose.
    pairs = [
        ("t1", "i1", True, True),
        ("t1", "i2", True, False),
        ("t2", "i1", False, False),
        ("t2", "i2", False, False),
        ("t1", "c1", True, True),
        ("t2", "c1", True, True),
        ("t3", "c1", True, None),
    ]
    grades = []
    for tid, cid, ref, llm in pairs:
        grades.append(_grade(tid, cid, "reference", ref))
        grades.append(_grade(tid, cid, "llm:m", llm))
    # Graded by the reference judge only: not part of any comparison.
    grades.append(_grade("t4", "i1", "reference", True))
    crits = [_criterion(r, "i1", "identify") for r in ("ra", "rb")] + [
        _criterion(r, "i2", "identify") for r in ("ra", "rb")
    ]
    # In room rb, c1 is a 'cite' criterion; in ra the same id is 'connect' (joins must use the room).
    crits += [_criterion("rb", "c1", "cite"), _criterion("ra", "c1", "connect")]
    db.write_many(
        con,
        {
            "trajectories": [
                _trajectory("t1", "rb"),
                _trajectory("t2", "rb"),
                _trajectory("t3", "rb"),
                _trajectory("t4", "ra"),
            ],
            "criteria": crits,
            "grades": grades,
        },
    )
    return con


def test_agreement_per_kind(con):
    rows = {(r["llm_judge"], r["kind"]): r for r in agreement_report(con)}
    assert set(rows) == {("llm:m", "identify"), ("llm:m", "cite"), ("llm:m", "all")}

    ident = rows[("llm:m", "identify")]
    # Pairs T/T, T/F, F/F, F/F: p_o = 0.75, p_ref = 0.5, p_llm = 0.25, p_e = 0.5, kappa = 0.5.
    assert ident["n"] == 4 and ident["n_ungraded"] == 0
    assert ident["agreement"] == pytest.approx(0.75)
    assert ident["kappa"] == pytest.approx(0.5)

    cite = rows[("llm:m", "cite")]
    # The ungraded LLM verdict is counted apart, not as a disagreement.
    assert cite["n"] == 2 and cite["n_ungraded"] == 1
    assert cite["agreement"] == pytest.approx(1.0)
    assert cite["kappa"] is None  # both judges passed everything: kappa undefined

    total = rows[("llm:m", "all")]
    ref = [True, True, False, False, True, True]
    llm = [True, False, False, False, True, True]
    assert total["n"] == 6 and total["n_ungraded"] == 1
    assert total["agreement"] == pytest.approx(5 / 6)
    assert total["kappa"] == pytest.approx(cohen_kappa(ref, llm)) == pytest.approx(2 / 3)


def test_agreement_empty_warehouse(tmp_path):
    assert agreement_report(db.connect(tmp_path / "empty.duckdb")) == []


def test_agreement_rows_in_memory_match_the_sql_report(con):
    pairs = [
        ("identify", True, True),
        ("identify", True, False),
        ("identify", False, False),
        ("identify", False, False),
        ("cite", True, True),
        ("cite", True, True),
        ("cite", True, None),
    ]
    rows = agreement_rows(pairs)
    assert [r["kind"] for r in rows] == ["cite", "identify", "all"]
    sql = {r["kind"]: r for r in agreement_report(con)}
    for row in rows:
        expected = {k: v for k, v in sql[row["kind"]].items() if k != "llm_judge"}
        assert row.keys() == expected.keys()
        for key, value in row.items():
            assert value == (pytest.approx(expected[key]) if isinstance(value, float) else expected[key]), key
    assert agreement_rows([]) == []
    only_ungraded = agreement_rows([("trap", None, True)])
    assert only_ungraded[-1] == {
        "kind": "all",
        "n": 0,
        "n_ungraded": 1,
        "agreement": None,
        "reference_pass_rate": None,
        "llm_pass_rate": None,
        "chance_agreement": None,
        "kappa": None,
    }
