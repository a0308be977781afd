"""Judge agreement: how often an LLM judge agrees with the reference judge.

For every (trajectory, criterion) graded by both the reference judge
(``grades.judge = 'reference'``) and an LLM judge (``'llm:<model>'``), the
query ``sql/queries/judge_agreement.sql`` reports per LLM judge and criterion
kind (plus ``kind = 'all'``): pairs compared, pairs left out because either
verdict is ungraded, agreement rate, both pass rates and Cohen's kappa.
"""

from __future__ import annotations

import duckdb

from pipeline import db


def agreement_report(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """One dict per (llm_judge, kind): n, n_ungraded, agreement, reference/llm pass rates, kappa."""
    rows = db.fetch_dicts(con, db.read_sql("queries/judge_agreement.sql"))
    for row in rows:
        for key in ("agreement", "reference_pass_rate", "llm_pass_rate", "chance_agreement", "kappa"):
            if row[key] is not None:
                row[key] = float(row[key])
    return rows
