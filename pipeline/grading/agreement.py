"""Judge agreement: how often an LLM judge agrees with the reference judge (or with known truth).

For every (trajectory, criterion) graded by both the reference judge
(``grades.judge = 'reference'``) and an LLM judge (``'llm:<model>'``), the
query ``sql/queries/judge_agreement.sql`` reports per LLM judge and criterion
kind (plus ``kind = 'all'``): pairs compared, pairs left out because either
verdict is ungraded, agreement rate, both pass rates and Cohen's kappa.

``agreement_rows`` computes the same figures from verdict pairs held in
memory (``python -m pipeline judge-check`` compares verdicts it never
writes to the warehouse): the rows have the same keys.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import duckdb

from pipeline import db
from pipeline.stats import cohen_kappa


def agreement_report(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """One dict per (llm_judge, kind): n, n_ungraded, agreement, reference/llm pass rates, kappa."""
    rows = db.fetch_dicts(con, db.read_sql("queries/judge_agreement.sql"))
    for row in rows:
        for key in ("agreement", "reference_pass_rate", "llm_pass_rate", "chance_agreement", "kappa"):
            if row[key] is not None:
                row[key] = float(row[key])
    return rows


def agreement_rows(pairs: Iterable[tuple[str, bool | None, bool | None]]) -> list[dict]:
    """Per criterion kind, then ``kind = 'all'``: agreement of (kind, reference verdict, llm verdict) pairs.

    Keys as ``agreement_report`` (less ``llm_judge``): n (pairs both judges
    graded), n_ungraded (either verdict None), agreement, reference_pass_rate,
    llm_pass_rate, chance_agreement and kappa (None when n is 0 or both judges
    gave one label to everything). Kinds are sorted; 'all' comes last.
    """
    by_kind: dict[str, list[tuple[bool | None, bool | None]]] = defaultdict(list)
    every: list[tuple[bool | None, bool | None]] = []
    for kind, ref, llm in pairs:
        by_kind[kind].append((ref, llm))
        every.append((ref, llm))
    rows = []
    for kind, kind_pairs in [*sorted(by_kind.items()), ("all", every)]:
        both = [(bool(r), bool(m)) for r, m in kind_pairs if r is not None and m is not None]
        n = len(both)
        ref_rate = sum(r for r, _ in both) / n if n else None
        llm_rate = sum(m for _, m in both) / n if n else None
        rows.append(
            {
                "kind": kind,
                "n": n,
                "n_ungraded": len(kind_pairs) - n,
                "agreement": sum(r == m for r, m in both) / n if n else None,
                "reference_pass_rate": ref_rate,
                "llm_pass_rate": llm_rate,
                "chance_agreement": ref_rate * llm_rate + (1 - ref_rate) * (1 - llm_rate) if n else None,
                "kappa": cohen_kappa([r for r, _ in both], [m for _, m in both]),
            }
        )
    return rows if every else []
