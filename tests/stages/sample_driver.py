"""Subprocess driver for the SIGKILL-and-resume test: `python sample_driver.py <run_dir>`.

Runs the real sample stage with a scripted root (tests.doubles) that writes
a delegation program, real REPL workers and the extractive subagent.
"""

import os
import sys

from pipeline.config import load_config
from stages import sample
from tests import doubles
from tests.doubles import make_scripted  # noqa: F401  (the root's kind names it here, see OVERRIDES)

PROGRAM = (
    "Reading every document.\n```python\n"
    "answers = llm_batch([f'=== {d.path} ===\\n{d.text}' for d in room.documents])\n"
    "print(len(answers))\n"
    "submit('\\n\\n'.join(a for a in answers if not a.startswith('No diligence')))\n```\n"
)


def _dies_once(messages):
    """Kills the process it runs in the first time it is called in a run (RLM_TEST_DIE_MARKER)."""
    marker = os.environ["RLM_TEST_DIE_MARKER"]
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return PROGRAM
    os._exit(1)


# Filled at import: the root's kind names this module, so Ray workers that load it get them too.
doubles.SCRIPTS["program"] = lambda messages: PROGRAM
doubles.SCRIPTS["dies_once"] = _dies_once

OVERRIDES = [
    "models.root.kind=tests.stages.sample_driver:make_scripted",
    "models.root.model=program",
    "sample.k=5",
    "sample.concurrency=2",
    "harness.max_turns=1",
]


def main() -> None:
    cfg = load_config("tiny", [f"run.dir={sys.argv[1]}", *OVERRIDES, *sys.argv[2:]])
    sample.run(cfg)


if __name__ == "__main__":
    main()
