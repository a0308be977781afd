"""A warehouse of real rooms and traces for the trajectory pages: tests and the page benchmark share it.

Rooms come from the synthetic generator; each trajectory is a real Trace
(turns with code and output, subagent calls in two llm_batch rounds, a memo)
written by the TraceWriter with its coverage rows, then graded by the
reference judge and filtered by the rejection filter, so every row the pages
read was made by the pipeline's own code. Memos are chosen so verdicts
differ: the rubric's own evidence for every other issue (some criteria pass,
the rest fail), a paragraph copied from the room, an unsupported claim.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from pipeline import db
from pipeline.config import PipelineConfig
from pipeline.grading.coverage import coverage_rows
from pipeline.grading.grade_run import grade_reference
from pipeline.grading.known_answers import evidence_memo
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.rooms.model import Room
from pipeline.rooms.store import save_room
from pipeline.rooms.synthetic.generator import generate_room
from pipeline.trace_store import TraceWriter, trajectory_id
from stages import filter as filter_stage

POLICY = "pol-world-base"
CODE = """chunks = []
for d in room.documents:
    for c in d.chunks(2000):
        chunks.append(f"Report every diligence issue in {d.path}:\\n{c}")
answers = llm_batch(chunks[: len(chunks) // 2])
answers += llm_batch(chunks[len(chunks) // 2 :])
print(len(answers), "answers;", sum(a.startswith("ERROR") for a in answers), "errors")
"""


def memo_for(room: Room, variant: int) -> str:
    """0: every other issue of the oracle memo plus a copied paragraph and a false claim; 1: the oracle; 2: none."""
    if variant == 2:
        return ""
    paras = evidence_memo(room).strip().split("\n\n")
    if variant == 1:
        return "\n\n".join(paras) + "\n"
    kept = [paras[0]] + paras[1::2]
    longest = max(room.documents, key=lambda d: len(d.text))
    copied = " ".join(longest.text.split()[:120])
    false_claim = (
        f"The agreement {room.documents[0].path} may be terminated on a change of control without consent."
    )
    return "\n\n".join([*kept, copied, false_claim]) + "\n"


def trace_for(room: Room, room_id: str, purpose: str, index: int, memo: str, n_batches: int = 2) -> Trace:
    """One call per document, in ``n_batches`` llm_batch rounds of the first turn; the last call fails."""
    prompts = [f"Report every diligence issue in {d.path}:\n{d.text}" for d in room.documents]
    size = -(-len(prompts) // n_batches)
    calls, t = [], 1.0
    for batch in (prompts[i : i + size] for i in range(0, len(prompts), size)):
        end = t
        for j, p in enumerate(batch):
            issued = t + 0.001 * (j % 64)  # 64 in flight: a call waits for a slot, never for the whole batch
            returned = issued + 0.5
            first = next((line for line in p.splitlines()[1:] if line.strip()), "")
            calls.append(
                Subcall(
                    index=len(calls), turn_index=0, depth=1, model="extractive", prompt=p,
                    response=f"- {first[:160]}\n- no further issues", prompt_tokens=len(p) // 4,
                    completion_tokens=40, latency_s=0.5, issued_s=issued, returned_s=returned,
                )
            )  # fmt: skip
            end = max(end, returned)
        t = end + 0.2
    calls[-1].error, calls[-1].response = "TimeoutError: subagent did not answer", None
    turns = [
        Turn(0, [{"role": "user", "content": f"Review the data room {room.name}."}], f"```python\n{CODE}```",
             code=f"# sample {index}\n{CODE}", output=f"{len(calls)} answers; 1 errors\n", prompt_tokens=900, completion_tokens=120,
             started_s=0.0, ended_s=t),
        Turn(1, [{"role": "user", "content": "Output: ..."}], "```python\nsubmit(memo)\n```",
             code="submit(memo)", output="", prompt_tokens=1400, completion_tokens=300, started_s=t, ended_s=t + 1),
    ]  # fmt: skip
    return Trace(
        trajectory_id=trajectory_id(POLICY, room_id, purpose, index),
        room=room.name,
        policy_id=POLICY,
        turns=turns if memo else turns[:1],
        subcalls=calls,
        memo=memo or None,
        status="submitted" if memo else "turn_limit",
        end_reason="submitted" if memo else "turn_limit",
        usage={},
        started_at="2026-12-01T09:00:00",
        wall_s=t + 1,
    )


def build(run_dir: Path, n_documents: int = 24, tokens_per_document: int = 250, k: int = 3) -> PipelineConfig:
    """A run folder with one train and one held-out room, ``k`` trajectories each, graded and filtered."""
    cfg = PipelineConfig()
    cfg.run.dir = str(run_dir)
    cfg.filter.require_submit = True
    cfg.filter.min_score = 0.6
    cfg.filter.min_coverage = 0.0
    with closing(db.connect(cfg.run.db_path)) as con:
        db.write_rows(
            con, "policies",
            [{"policy_id": POLICY, "base_model": "smollm2-135m-instruct", "adapter": None, "backend": "local",
              "prompt": "worked_example", "harness": "rlm", "sampling": {"temperature": 0.8}, "parent_id": None,
              "train_id": None, "served_model": "smollm2-135m-instruct", "created_at": db.now()}],
        )  # fmt: skip
        writer = TraceWriter(con)
        for j, (split, purpose) in enumerate((("train", "train"), ("heldout", "eval"))):
            room = generate_room(f"world-{split}", 11 + j, n_documents, tokens_per_document, split=split)
            save_room(con, room)
            for i in range(k):
                trace = trace_for(room, room.name, purpose, i, memo_for(room, i % 3))
                writer.add_trace(trace, room_id=room.name, policy_id=POLICY, sample_index=i, purpose=purpose,
                                 coverage=coverage_rows(trace, room))  # fmt: skip
        writer.flush()
        grade_reference(con, cfg)
    filter_stage.run(cfg)
    return cfg
