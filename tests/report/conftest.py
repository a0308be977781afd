"""``world``: one run folder of real rooms and traces with its report built, shared by the page and cost tests.

Tests that change it work on a copy of ``world[0].run.dir``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stages import report
from tests.report.trace_world import build


@pytest.fixture(scope="session")
def world(tmp_path_factory):
    cfg = build(tmp_path_factory.mktemp("world") / "run")
    report.run(cfg)
    return cfg, Path(cfg.run.dir) / "report"
