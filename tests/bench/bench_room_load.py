"""Benchmark: how fast a sandbox worker opens an 80M-token room (target: ready in at most 5 s).

Builds a synthetic room of ~80M tokens (5,000 documents of ~16k tokens each;
the text is synthetic, independent of the room generator), exports it with
pipeline.harness.room_export, starts a Sandbox and times how long the worker
takes to report ready. Then, as context, times one cell that decodes every
document and one cell that regex-searches the whole room.

Run: python tests/bench/bench_room_load.py [--tokens 80000000] [--docs 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from pipeline.harness import kernel_layer
from pipeline.harness.room_export import export_room
from pipeline.harness.sandbox import Sandbox, SandboxLimits
from pipeline.rooms.model import CATEGORIES, Document, Room

TARGET_READY_S = 5.0


def synthetic_room(n_tokens: int, n_docs: int, seed: int = 0) -> Room:
    rng = random.Random(seed)
    words = "agreement party shall terms consent assignment indemnity warranty seller buyer notice".split()
    paragraphs = [
        " ".join(rng.choice(words) for _ in range(rng.randint(40, 120))).capitalize() + "."
        for _ in range(200)
    ]
    chars_per_doc = n_tokens * 4 // n_docs
    docs = []
    for i in range(n_docs):
        parts, size = [], 0
        while size < chars_per_doc:
            p = paragraphs[rng.randrange(len(paragraphs))]
            parts.append(p)
            size += len(p) + 2
        text = "\n\n".join(parts)[:chars_per_doc]
        cat = CATEGORIES[i % len(CATEGORIES)]
        docs.append(Document(f"{i % 40:02d}_{cat}/doc_{i:05d}.txt", cat, f"Document {i}", text))
    # One needle at the very end, so the search cell scans the whole room.
    docs[-1].text += "\n\nSection 14.2: Change of Control requires the consent of the lender."
    return Room(name="bench_room", target={"name": "Bench Co"}, deal={"type": "merger"}, documents=docs)


async def measure(room_dir: Path, level: str = "auto") -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.monotonic()
    sb = Sandbox(room_dir, SandboxLimits(cell_timeout_s=120.0, output_chars=2000, level=level))
    await sb.start()
    out["ready_s"] = time.monotonic() - t0
    out["worker_load_s"] = float(sb.ready_info.get("load_s", float("nan")))
    try:
        r = await sb.run_cell("print(sum(len(d.text) for d in documents))")
        assert r.error is None, r.error
        out["read_all_s"] = r.seconds
        out["read_chars"] = float(r.output.strip())
        r = await sb.run_cell("print(room.search(r'(?i)change of control'))")
        assert r.error is None and "Change of Control" in r.output, (r.error, r.output[:200])
        out["search_all_s"] = r.seconds
    finally:
        await sb.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=80_000_000)
    ap.add_argument("--docs", type=int, default=5000)
    args = ap.parse_args()

    t0 = time.monotonic()
    room = synthetic_room(args.tokens, args.docs)
    build_s = time.monotonic() - t0
    with tempfile.TemporaryDirectory(prefix="bench-room-") as tmp:
        t0 = time.monotonic()
        room_dir = export_room(room, Path(tmp) / "room")
        export_s = time.monotonic() - t0
        t0 = time.monotonic()
        export_room(room, room_dir)
        reexport_s = time.monotonic() - t0
        size_mb = (room_dir / "texts.bin").stat().st_size / 2**20
        n_tokens = room.n_tokens
        del room
        # The kernel layer's cost, side by side: every level this machine offers (strongest last).
        levels = kernel_layer.available_levels()
        by_level = {lv: asyncio.run(measure(room_dir, lv)) for lv in levels}
        m = by_level[levels[-1]]

    print(f"room: {args.docs} documents, {n_tokens / 1e6:.1f}M tokens, texts.bin {size_mb:.0f} MB")
    print(f"build (synthetic text)      {build_s:7.2f} s")
    print(f"export                      {export_s:7.2f} s")
    print(f"re-export (already current) {reexport_s:7.2f} s   (hash check only)")
    print(
        f"worker ready                {m['ready_s']:7.2f} s   target <= {TARGET_READY_S:.1f} s   "
        f"ratio {m['ready_s'] / TARGET_READY_S:.3f} of target"
    )
    print(f"  of which in the worker    {m['worker_load_s']:7.2f} s   (map room, preload modules, limits)")
    print(f"cell: decode every document {m['read_all_s']:7.2f} s   ({m['read_chars'] / 1e6:.0f}M characters)")
    print(f"cell: regex over the room   {m['search_all_s']:7.2f} s")
    base = by_level["python"]["ready_s"]
    print("worker ready by kernel level (pipeline.harness.kernel_layer):")
    for lv, r in by_level.items():
        print(f"  {lv:<14} {r['ready_s']:7.3f} s   {r['ready_s'] / base:5.2f}x the python level")


if __name__ == "__main__":
    main()
