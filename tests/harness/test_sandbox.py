"""The REPL sandbox as the root uses it: namespace, output cut, room API, LLM calls, submit.

Hostile programs are in test_hostile.py; these tests run ordinary model code
through a real worker process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psutil
import pytest

from pipeline.harness import worker
from pipeline.harness.room_export import export_room
from pipeline.harness.room_view import RoomFormatError, RoomView, chunk_text, count_tokens
from pipeline.harness.sandbox import CellResult, Sandbox, SandboxError, SandboxLimits
from pipeline.rooms.model import Document, Room

LONG = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor " * 12 for i in range(30))


def small_room() -> Room:
    return Room(
        name="acme_room",
        target={"name": "Acme Widgets Ltd", "industry": "widgets"},
        deal={"type": "share purchase", "price": 12_500_000},
        documents=[
            Document(
                "01_corporate/charter.txt", "corporate", "Charter", "Acme Widgets Ltd charter.\n\nArticle 1."
            ),
            Document(
                "03_material_contracts/customers/msa_globex.txt",
                "material_contracts",
                "MSA Globex",
                "Master services agreement.\n\nSection 9: Change of Control. Globex may terminate.\n\nFees: $1,200,000.",
            ),
            Document(
                "03_material_contracts/supply_initech.txt",
                "material_contracts",
                "Supply",
                "Supply terms.\n\nÜber café.",
            ),
            Document("10_litigation/claims.txt", "litigation", "Claims", LONG, doc_kind="memo"),
        ],
    )


@pytest.fixture(scope="module")
def room_dir(tmp_path_factory) -> Path:
    return export_room(small_room(), tmp_path_factory.mktemp("room") / "acme_room")


LIMITS = SandboxLimits(cell_timeout_s=5.0, memory_mb=256, output_chars=300, grace_s=1.0)


async def echo_llm(kind: str, payload: dict):
    if kind == "batch":
        out = []
        for p in payload["prompts"]:
            if "fail" in p:
                out.append(RuntimeError(f"subagent refused {p!r}"))
            else:
                await asyncio.sleep(0.001 * (len(p) % 5))  # answers finish out of order
                out.append(f"answer to {p}")
        return out
    return f"child read {len(payload['paths'])} docs: {payload['prompt']}"


def run(coro):
    return asyncio.run(coro)


async def cells(
    room_dir: Path, *codes: str, limits: SandboxLimits = LIMITS, on_llm=echo_llm
) -> list[CellResult]:
    async with Sandbox(room_dir, limits, on_llm) as sb:
        return [await sb.run_cell(c) for c in codes]


# -- export and view, in this process ---------------------------------------------
def test_export_is_idempotent_and_follows_content(tmp_path):
    room = small_room()
    out = export_room(room, tmp_path / "r")
    index = out / "index.json"
    first = index.stat().st_mtime_ns
    meta = json.loads(index.read_text())
    assert meta["n_documents"] == 4 and meta["n_tokens"] == room.n_tokens
    assert export_room(room, tmp_path / "r") == out
    assert index.stat().st_mtime_ns == first  # same content: nothing rewritten
    room.documents[0].text += " Amended."
    export_room(room, tmp_path / "r")
    assert json.loads(index.read_text())["content_hash"] != meta["content_hash"]
    assert RoomView(out).read("01_corporate/charter.txt").endswith("Amended.")


def test_view_matches_room(room_dir):
    room, view = small_room(), RoomView(room_dir)
    assert view.name == room.name and view.target == room.target and view.deal == room.deal
    assert view.folders == room.folders
    assert view.n_tokens == room.n_tokens
    for d in room.documents:
        v = view.doc(d.path)
        assert (v.text, v.category, v.title, v.folder, v.n_tokens) == (
            d.text,
            d.category,
            d.title,
            d.folder,
            d.n_tokens,
        )
    with pytest.raises(KeyError, match="did you mean"):
        view.read("01_corporate/charter.tx")


def test_corrupt_export_names_the_file(tmp_path):
    out = export_room(small_room(), tmp_path / "r")
    (out / "texts.bin").write_bytes(b"short")
    with pytest.raises(RoomFormatError, match="texts.bin"):
        RoomView(out)
    (out / "index.json").write_text("{not json")
    with pytest.raises(RoomFormatError, match="index.json"):
        RoomView(out)


def test_chunks_respect_the_token_limit_and_paragraphs():
    chunks = chunk_text(LONG, 100)
    assert len(chunks) > 1
    assert all(count_tokens(c) <= 100 for c in chunks)
    assert all(c.startswith("Paragraph") for c in chunks)  # cut between paragraphs, not inside one
    assert [p for c in chunks for p in c.split("\n\n")] == LONG.split("\n\n")
    one_line = "x" * 1000
    assert [len(c) for c in chunk_text(one_line, 100)] == [400, 400, 200]
    with pytest.raises(ValueError):
        chunk_text("abc", 0)


# -- the worker ----------------------------------------------------------------------
def test_namespace_persists_and_bare_expressions_are_not_echoed(room_dir):
    r = run(cells(room_dir, "x = 40\ndef inc(v): return v + 1", "print(inc(x) + 1)", "x * 1000"))
    assert [c.error for c in r] == [None, None, None]
    assert r[1].output == "42\n"
    assert r[2].output == ""  # a bare last expression is not echoed: only print() reaches the root


def test_output_is_cut_with_marker(room_dir):
    (r,) = run(cells(room_dir, "print('a' * 5000)"))
    assert r.output == "a" * 300 + "\n[... 4701 more characters]"
    assert r.limit == "output" and r.error is None


def test_unencodable_text_is_replaced_not_fatal(room_dir):
    r = run(cells(room_dir, "print('bad \\ud800 char')\nsubmit('memo \\udfff')", "print('ok')"))
    assert (r[0].output, r[0].submitted, r[0].reset) == ("bad ? char\n", "memo ?", False)
    assert r[1].output == "ok\n"


def test_errors_show_only_model_frames(room_dir):
    r = run(cells(room_dir, "def f(d):\n    return d['missing']\nf({})", "print(1 +)"))
    assert r[0].error.startswith("Traceback") and "KeyError: 'missing'" in r[0].error
    assert "<cell-1>" in r[0].error and "worker.py" not in r[0].error
    assert "SyntaxError" in r[1].error
    assert r[0].limit is None and not r[0].reset


def test_allowed_modules_work_and_others_are_refused(room_dir):
    code = """
from __future__ import annotations
import re, json, math, statistics, datetime, collections, dataclasses, enum, textwrap, difflib, decimal
@dataclasses.dataclass
class Hit:
    path: str
    n: int = 0
P = collections.namedtuple("P", "a b")
class Color(enum.Enum):
    RED = 1
d = datetime.datetime.strptime("2024-03-01", "%Y-%m-%d")
print(Hit("x", 2), P(1, 2).b, Color.RED.name, d.year, statistics.mean([1, 2, 3]), "é".encode("latin-1"))
"""
    r = run(cells(room_dir, code, "import os", "import pathlib"))
    assert r[0].error is None, r[0].error
    assert r[0].output == "Hit(path='x', n=2) 2 RED 2024 2 b'\\xe9'\n"
    assert "ImportError" in r[1].error and "'os' is not allowed" in r[1].error and r[1].limit == "sandbox"
    assert "ImportError" in r[2].error


def test_room_api(room_dir):
    code = """
print(room.name, room.target["name"], room.deal["price"], room.folders)
print(len(documents), [d.path for d in room.docs(category="material_contracts")])
print([d.path for d in room.docs(folder="03_material_contracts/customers")])
print(room.read("03_material_contracts/supply_initech.txt").split("\\n\\n")[1])
hits = room.search(r"(?i)change of control")
path, offset, snippet = hits[0]
print(len(hits), path, offset, room.read(path)[offset:offset + 17])
print(len(room.search("Paragraph", max_hits=5)))
doc = room.docs(category="litigation")[0]
ch = doc.chunks(100)
print(doc.n_tokens, len(ch), max(len(c) for c in ch) <= 400, "\\n\\n".join(ch) == doc.text)
"""
    (r,) = run(cells(room_dir, code, limits=SandboxLimits(output_chars=4000)))
    assert r.error is None, r.error
    lines = r.output.splitlines()
    assert lines[0] == (
        "acme_room Acme Widgets Ltd 12500000 ['01_corporate', '03_material_contracts', "
        "'03_material_contracts/customers', '10_litigation']"
    )
    assert lines[1] == (
        "4 ['03_material_contracts/customers/msa_globex.txt', '03_material_contracts/supply_initech.txt']"
    )
    assert lines[2] == "['03_material_contracts/customers/msa_globex.txt']"
    assert lines[3] == "Über café."
    assert lines[4] == "1 03_material_contracts/customers/msa_globex.txt 39 Change of Control"
    assert lines[5] == "5"
    assert lines[6] == f"{count_tokens(LONG)} {len(chunk_text(LONG, 100))} True True"


def test_llm_batch_keeps_order_and_reports_failures(room_dir):
    code = """
answers = llm_batch([f"q{i}" for i in range(7)] + ["please fail"])
print(answers[:3], answers[-1])
print(llm_query("hello"))
print(rlm_query("summarise", room.docs(category="material_contracts")))
print(llm_batch([]))
"""
    (r,) = run(cells(room_dir, code, limits=SandboxLimits(output_chars=4000)))
    assert r.error is None, r.error
    lines = r.output.splitlines()
    assert (
        lines[0]
        == "['answer to q0', 'answer to q1', 'answer to q2'] ERROR: RuntimeError: subagent refused 'please fail'"
    )
    assert lines[1] == "answer to hello"
    assert lines[2] == "child read 2 docs: summarise"
    assert lines[3] == "[]"


def test_failing_handler_becomes_error_strings(room_dir):
    async def broken(kind, payload):
        raise ConnectionError("backend down")

    code = "print(llm_batch(['a', 'b']))\nprint(rlm_query('x', ['01_corporate/charter.txt']))"
    (r,) = run(cells(room_dir, code, on_llm=broken))
    assert r.error is None and r.limit is None
    assert r.output == (
        "['ERROR: ConnectionError: backend down', 'ERROR: ConnectionError: backend down']\n"
        "ERROR: ConnectionError: backend down\n"
    )


def test_bad_arguments_are_model_errors(room_dir):
    r = run(
        cells(
            room_dir,
            "llm_batch('not a list')",
            "llm_query(3)",
            "submit(42)",
            "rlm_query('x', ['nope.txt'])",
        )
    )
    assert all(c.error and not c.reset for c in r)
    assert "TypeError" in r[0].error and "TypeError" in r[1].error and "TypeError" in r[2].error
    assert "KeyError" in r[3].error


def test_a_batch_larger_than_a_frame_streams_in_parts_and_a_too_big_prompt_is_its_own_error(room_dir):
    seen: list[int] = []

    async def counting(kind: str, payload: dict):
        seen.append(len(payload["prompts"]))
        return [f"len {len(p)}" for p in payload["prompts"]]

    limits = SandboxLimits(cell_timeout_s=60.0, memory_mb=768, output_chars=300)
    big, over = worker.MAX_FRAME_BYTES + 2**20, worker.MAX_PROMPT_BYTES + 2**20
    r = run(
        cells(
            room_dir,
            # 65 prompts of 1 MiB: over one frame; once refused whole, now sent part by part, in order
            f"a = llm_batch([chr(65 + i % 26) * 2**20 for i in range({big >> 20})])\nprint(len(a), a[0], a[-1])",
            f"b = llm_batch(['short', 'x' * {over}, 'also short'])\nprint(b[0], '|', b[1][:40], '|', b[2])",
            limits=limits,
            on_llm=counting,
        )
    )
    assert r[0].error is None, r[0].error
    assert r[0].output.split() == [str(big >> 20), "len", str(2**20), "len", str(2**20)]
    assert len(seen) > 2 and all(n * 2**20 <= worker.BATCH_PART_BYTES for n in seen[:-1])
    assert r[1].error is None, r[1].error
    assert r[1].output.startswith("len 5 | ERROR: prompt of") and r[1].output.rstrip().endswith("len 10")
    assert seen[-1] == 2  # the oversized prompt never left the worker


def test_submit_records_the_memo(room_dir):
    r = run(cells(room_dir, "print('before')", "submit('# Memo\\nAll clear.')\nprint('after')"))
    assert r[0].submitted is None
    assert r[1].submitted == "# Memo\nAll clear." and r[1].output == "after\n" and r[1].error is None


def test_llm_wait_does_not_count_against_the_cell_time(room_dir):
    async def slow(kind, payload):
        await asyncio.sleep(1.5)
        return ["late"] * len(payload["prompts"])

    limits = SandboxLimits(cell_timeout_s=1.0, grace_s=0.3, memory_mb=256)
    (r,) = run(cells(room_dir, "print(llm_query('q'))", limits=limits, on_llm=slow))
    assert (r.output, r.error, r.reset) == ("late\n", None, False)


def test_sandboxes_share_the_loop_and_overlap_llm_calls(room_dir):
    in_flight, peak = 0, 0
    all_in = asyncio.Event()

    async def handler(kind, payload):
        # Each call waits until all three are in flight: served one at a time, they would time out here.
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            all_in.set()
        try:
            await asyncio.wait_for(all_in.wait(), 5.0)
        except TimeoutError:
            pass
        in_flight -= 1
        return [p.upper() for p in payload["prompts"]]

    async def main():
        boxes = [Sandbox(room_dir, LIMITS, handler) for _ in range(3)]
        await asyncio.gather(*(b.start() for b in boxes))
        try:
            return await asyncio.gather(
                *(b.run_cell(f"print(llm_query('box{i}'))") for i, b in enumerate(boxes))
            )
        finally:
            await asyncio.gather(*(b.close() for b in boxes))

    results = run(main())
    assert [r.output for r in results] == ["BOX0\n", "BOX1\n", "BOX2\n"]
    assert peak == 3


def test_cancelled_cell_kills_the_worker_and_the_next_cell_gets_a_fresh_one(room_dir):
    async def main():
        async with Sandbox(room_dir, LIMITS, echo_llm) as sb:
            await sb.run_cell("x = 1")
            first = sb.pid
            task = asyncio.ensure_future(sb.run_cell("while True:\n    x = x + 1"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gone = not psutil.pid_exists(first)
            r = await sb.run_cell("print('x' in globals())")
            return gone, r, sb.pid != first

    gone, r, new_pid = run(main())
    assert gone and new_pid
    assert r.output == "False\n"


def test_lifecycle_errors(tmp_path, room_dir):
    async def main():
        with pytest.raises(SandboxError, match="index.json"):
            await Sandbox(tmp_path / "nowhere").start()
        sb = Sandbox(room_dir, LIMITS)
        await sb.start()
        pid, workdir = sb.pid, sb.workdir
        assert psutil.pid_exists(pid) and workdir.is_dir()
        r = await sb.run_cell("print(llm_query('x'))")  # no handler configured
        await sb.close()
        await sb.close()
        with pytest.raises(SandboxError, match="closed"):
            await sb.run_cell("print(1)")
        return pid, workdir, r

    pid, workdir, r = run(main())
    assert r.output.startswith("ERROR: no LLM handler")
    assert not psutil.pid_exists(pid)
    assert not workdir.exists()
