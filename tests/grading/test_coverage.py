"""Coverage from model inputs, checked against hand-computed expectations."""

from pipeline.grading.coverage import coverage_rows
from pipeline.harness.trace import Subcall, Trace, Turn
from pipeline.rooms.model import Document, Room
from pipeline.rooms.probes import PROBE_CHARS, ProbeIndex, sample_probes, sentence_keys

S = [
    "Section 1. The Supplier shall deliver all Products to the Purchaser within thirty days of each order.",
    "Section 2. Either party may terminate this Agreement upon ninety days written notice to the other party.",
    "Section 3. The Company has obtained all permits required for the operation of its Fremont facility.",
    "Section 4. The Employee hereby assigns to the Company all inventions conceived during employment here.",
]


def room() -> Room:
    docs = [
        Document("01_corporate/a.txt", "corporate", "A", S[0] + " " + S[1]),
        Document("02_tax/b.txt", "tax", "B", S[2]),
        Document("02_tax/c.txt", "tax", "C", S[3]),
    ]
    r = Room("cov", {"name": "T"}, {"type": "merger"}, docs)
    r.probes = sample_probes(docs, seed=0, tokens_per_probe=10)
    return r


def test_probes_are_sentence_prefixes_unique_in_room():
    r = room()
    assert len(r.probes) >= 4  # a.txt gets two (two sentences, ~50 tokens / 10)
    for p in r.probes:
        assert len(p.text) == PROBE_CHARS
        assert r.doc(p.path).text[p.char_offset :].startswith(p.text)
    assert {p.path for p in r.probes} == {d.path for d in r.documents}


def test_probe_index_ignores_text_not_at_sentence_start():
    r = room()
    idx = ProbeIndex(r.probes)
    probe = r.probes[0]
    assert idx.seen([probe.text + " and more"]) == {probe.probe_id}
    assert idx.seen(["xx" + probe.text]) == set()  # mid-sentence: not a sentence start
    assert sentence_keys("Hello. " + probe.text)[-1] == probe.text


def test_coverage_rows_split_by_scope_folder_and_category():
    r = room()
    trace = Trace("t1", "cov", "p")
    # The root saw document b.txt in a REPL output; a subagent read a.txt.
    trace.turns = [
        Turn(
            0,
            [
                {"role": "system", "content": "You are the root."},
                {"role": "user", "content": S[3], "example": True},
            ],
            "```python\n```",
        ),
        Turn(1, [{"role": "user", "content": "REPL output:\n" + S[2]}], "done"),
    ]
    trace.subcalls = [Subcall(0, 0, 1, "x", "=== 01_corporate/a.txt ===\n" + S[0] + " " + S[1], "ok")]
    rows = {
        (x["scope"], x["grouping"], x["group_value"]): (x["n_seen"], x["n_probes"])
        for x in coverage_rows(trace, r)
    }
    n_a = sum(p.path == "01_corporate/a.txt" for p in r.probes)
    n_total = len(r.probes)
    # root: only b.txt (the worked-example message with S[3] does not count)
    assert rows[("root", "total", "")] == (1, n_total)
    assert rows[("subagent", "total", "")] == (n_a, n_total)
    assert rows[("all", "total", "")] == (n_a + 1, n_total)
    assert rows[("all", "category", "tax")] == (1, 2)
    assert rows[("all", "folder", "01_corporate")] == (n_a, n_a)
    assert rows[("root", "folder", "01_corporate")] == (0, n_a)
