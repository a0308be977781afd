"""Headless Chromium for tests: the page as the browser left it (--dump-dom), after its scripts ran.

``make browser`` installs Debian's chromium; tests skip without it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("chromium not installed (make browser installs it)")


def flags(profile: Path) -> list[str]:
    return [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
    ]  # fmt: skip


def dump_dom(url: str, profile: Path, budget_ms: int = 5000) -> str:
    """The DOM after the page's scripts ran (virtual time: timers and script loads run to ``budget_ms``)."""
    cmd = [chromium(), *flags(profile), f"--virtual-time-budget={budget_ms}", "--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout
