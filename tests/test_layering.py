"""The layering rules from the README, checked from the code's own imports.

Imports inside functions count: a lazy import still makes the library depend
on what it imports. Only the CLI and the orchestrating stages (distill,
nightly) may import stages; nothing may form an import cycle; pipeline.llm
(the backends, with the stand-in reader) never imports pipeline.grading, so
the reader cannot agree with the judge by sharing its vocabulary.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORCHESTRATORS = {"stages.distill", "stages.nightly"}
MAX_LINES = {"pipeline": 800, "stages": 250}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    files = [*ROOT.joinpath("pipeline").rglob("*.py"), *ROOT.joinpath("stages").rglob("*.py")]
    return {_module_name(p): p for p in files}


def import_graph() -> dict[str, set[str]]:
    """module -> project modules it imports (anywhere in the file)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_library_never_imports_a_stage():
    bad = {m: sorted(e for e in edges if e.startswith("stages")) for m, edges in import_graph().items()}
    bad = {m: e for m, e in bad.items() if e and m.startswith("pipeline") and m != "pipeline.cli"}
    assert bad == {}


def test_only_orchestrators_import_stages():
    graph = import_graph()
    bad = {
        m: sorted(e for e in edges if e.startswith("stages."))
        for m, edges in graph.items()
        if m.startswith("stages.") and m not in ORCHESTRATORS
    }
    assert {m: e for m, e in bad.items() if e} == {}


# package -> packages it must never import (the stand-in reader must not read with the judge's answer key)
FORBIDDEN = {"pipeline.llm": ("pipeline.grading",)}


def _forbidden_edges(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    bad = {}
    for m, edges in graph.items():
        for package, banned in FORBIDDEN.items():
            if m == package or m.startswith(package + "."):
                hits = sorted(e for e in edges if any(e == b or e.startswith(b + ".") for b in banned))
                if hits:
                    bad[m] = hits
    return bad


def test_no_forbidden_imports():
    assert _forbidden_edges(import_graph()) == {}


def test_forbidden_import_rule_catches_one():
    graph = {"pipeline.llm.extractive": {"pipeline.grading.criteria", "pipeline.rooms.model"}}
    assert _forbidden_edges(graph) == {"pipeline.llm.extractive": ["pipeline.grading.criteria"]}


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("top", sorted(MAX_LINES))
def test_no_file_over_its_size(top):
    limit = MAX_LINES[top]
    over = {
        str(p.relative_to(ROOT)): n
        for p in ROOT.joinpath(top).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > limit
    }
    assert over == {}


def test_readme_tree_lists_every_module():
    """Every library module is named in the README's file tree (a newcomer can find it there)."""
    readme = ROOT.joinpath("README.md").read_text()
    tree = readme[readme.index("## File tree") : readme.index("## Which library does what")]
    missing = sorted(
        str(p.relative_to(ROOT))
        for p in ROOT.joinpath("pipeline").rglob("*.py")
        if p.name not in {"__init__.py", "__main__.py"} and p.name not in tree
    )
    assert missing == []
