"""Read-only view of an exported room, as the REPL's ``room`` variable.

Loaded inside the sandbox worker, so it uses the standard library only: no
pyarrow, numpy or duckdb, whose C extensions do their own file and network
I/O and would be reachable from model code. The room comes from the two files
pipeline.harness.room_export writes: ``index.json`` (metadata, one entry per
document with a byte offset and length) and ``texts.bin`` (every document's
UTF-8 text, concatenated). ``texts.bin`` is memory-mapped and a document's
text is decoded only when asked for, so an 80M-token room opens in well under
a second and costs address space, not resident memory, until it is read.

Tokens are counted as in pipeline.rooms.model.count_tokens (4 characters a
token); the function is repeated here because the worker must not import the
rest of the package.
"""

from __future__ import annotations

import difflib
import json
import mmap
import re
from pathlib import Path
from typing import NamedTuple

INDEX_FILE = "index.json"
TEXTS_FILE = "texts.bin"
FORMAT_VERSION = 1

# search() bounds: a regex over a whole room can match millions of times, and
# only what is printed reaches the root, so hits are capped.
DEFAULT_MAX_HITS = 50
MAX_HITS_CAP = 5000
DEFAULT_CONTEXT = 80


class RoomFormatError(ValueError):
    """An exported room whose files do not match the format (names file and field)."""


def count_tokens(text: str) -> int:
    """Approximate token count, the same rule as pipeline.rooms.model.count_tokens."""
    return max(1, (len(text) + 3) // 4)


class SearchHit(NamedTuple):
    """One regex match: the document path, the character offset in its text, and a snippet around it."""

    path: str
    offset: int
    snippet: str


def _split_long(text: str, max_chars: int) -> list[str]:
    """Split one over-long paragraph on line boundaries, then hard-cut lines still too long."""
    out: list[str] = []
    cur = ""
    for line in text.split("\n"):
        while len(line) > max_chars:
            if cur:
                out.append(cur)
                cur = ""
            out.append(line[:max_chars])
            line = line[max_chars:]
        cand = f"{cur}\n{line}" if cur else line
        if len(cand) <= max_chars:
            cur = cand
        else:
            out.append(cur)
            cur = line
    if cur:
        out.append(cur)
    return out


def chunk_text(text: str, max_tokens: int) -> list[str]:
    """Cut text into pieces of at most ``max_tokens`` tokens, on paragraph boundaries where possible.

    Paragraphs (separated by blank lines) are packed greedily; a paragraph
    longer than a chunk is split on line breaks, and a line longer than a
    chunk is cut at the character limit. Joining the chunks with blank lines
    gives the text back up to whitespace between paragraphs.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"chunks(max_tokens): expected a positive int, got {max_tokens!r}")
    max_chars = max_tokens * 4
    paras = [p for p in re.split(r"\n[ \t]*\n+", text) if p.strip()]
    chunks: list[str] = []
    cur = ""
    for p in paras:
        if len(p) > max_chars:
            if cur:
                chunks.append(cur)
                cur = ""
            chunks.extend(_split_long(p, max_chars))
            continue
        cand = f"{cur}\n\n{p}" if cur else p
        if len(cand) <= max_chars:
            cur = cand
        else:
            chunks.append(cur)
            cur = p
    if cur:
        chunks.append(cur)
    return chunks


class DocView:
    """One document of the room: metadata in memory, text decoded from the mapped file on access."""

    __slots__ = ("_room", "path", "folder", "category", "title", "doc_kind", "n_tokens", "_offset", "_length")

    def __init__(
        self,
        room: RoomView,
        path: str,
        folder: str,
        category: str,
        title: str,
        doc_kind: str,
        n_tokens: int,
        offset: int,
        length: int,
    ) -> None:
        self._room = room
        self.path = path
        self.folder = folder
        self.category = category
        self.title = title
        self.doc_kind = doc_kind
        self.n_tokens = n_tokens
        self._offset = offset
        self._length = length

    @property
    def text(self) -> str:
        return self._room._decode(self._offset, self._length)

    def chunks(self, max_tokens: int = 8000) -> list[str]:
        """The text cut on paragraph boundaries into pieces of at most ``max_tokens`` tokens."""
        return chunk_text(self.text, max_tokens)

    def __repr__(self) -> str:
        return f"<Doc {self.path!r} {self.category} {self.n_tokens} tokens>"


class RoomView:
    """The data room as the root's REPL sees it; nothing in it can change the files."""

    def __init__(self, room_dir: str | Path) -> None:
        room_dir = Path(room_dir)
        index_path = room_dir / INDEX_FILE
        texts_path = room_dir / TEXTS_FILE
        try:
            meta = json.loads(index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RoomFormatError(f"{index_path}: missing (export the room first)") from None
        except json.JSONDecodeError as e:
            raise RoomFormatError(f"{index_path}: not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise RoomFormatError(f"{index_path}: expected an object at the top level")
        if meta.get("format") != FORMAT_VERSION:
            raise RoomFormatError(
                f"{index_path}: field 'format' is {meta.get('format')!r}, expected {FORMAT_VERSION}"
            )
        for key, typ in (
            ("name", str),
            ("target", dict),
            ("deal", dict),
            ("documents", list),
            ("texts_bytes", int),
        ):
            if not isinstance(meta.get(key), typ):
                raise RoomFormatError(f"{index_path}: field {key!r} missing or not a {typ.__name__}")
        size = texts_path.stat().st_size if texts_path.exists() else -1
        if size != meta["texts_bytes"]:
            raise RoomFormatError(f"{texts_path}: {size} bytes, index.json says {meta['texts_bytes']}")
        self.name: str = meta["name"]
        self.target: dict = meta["target"]
        self.deal: dict = meta["deal"]
        self.content_hash: str = meta.get("content_hash", "")
        if size:
            with open(texts_path, "rb") as f:
                # mmap keeps its own duplicate of the descriptor; the file object can close.
                self._mm: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        else:
            self._mm = b""
        self._docs: list[DocView] = []
        self._by_path: dict[str, DocView] = {}
        fields = ("path", "folder", "category", "title", "doc_kind", "n_tokens", "offset", "length")
        for i, d in enumerate(meta["documents"]):
            if not isinstance(d, dict):
                raise RoomFormatError(f"{index_path}: documents[{i}] is not an object")
            for k in fields:
                want = int if k in ("n_tokens", "offset", "length") else str
                if not isinstance(d.get(k), want):
                    raise RoomFormatError(
                        f"{index_path}: documents[{i}] field {k!r} missing or not a {want.__name__}"
                    )
            if d["offset"] < 0 or d["length"] < 0 or d["offset"] + d["length"] > size:
                raise RoomFormatError(f"{index_path}: documents[{i}] ({d['path']}) lies outside {TEXTS_FILE}")
            if d["path"] in self._by_path:
                raise RoomFormatError(f"{index_path}: duplicate document path {d['path']!r}")
            doc = DocView(self, *(d[k] for k in fields))
            self._docs.append(doc)
            self._by_path[doc.path] = doc
        self.folders: list[str] = sorted({d.folder for d in self._docs})
        self.n_tokens: int = sum(d.n_tokens for d in self._docs)

    # -- reading -------------------------------------------------------------
    def _decode(self, offset: int, length: int) -> str:
        return self._mm[offset : offset + length].decode("utf-8")

    @property
    def documents(self) -> list[DocView]:
        return list(self._docs)

    @property
    def categories(self) -> list[str]:
        return sorted({d.category for d in self._docs})

    def docs(self, folder: str | None = None, category: str | None = None) -> list[DocView]:
        """Documents in ``folder`` (that folder and its subfolders) and/or of ``category``."""
        out = self._docs
        if folder is not None:
            f = folder.strip("/")
            out = [d for d in out if d.folder == f or d.folder.startswith(f + "/") or f == ""]
        if category is not None:
            out = [d for d in out if d.category == category]
        return list(out)

    def doc(self, path: str) -> DocView:
        try:
            return self._by_path[path]
        except KeyError:
            close = difflib.get_close_matches(str(path), list(self._by_path), n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise KeyError(f"no document {path!r} in room {self.name!r}{hint}") from None

    def read(self, path: str) -> str:
        """The full text of the document at ``path``."""
        return self.doc(path).text

    def search(
        self,
        pattern: str | re.Pattern,
        *,
        folder: str | None = None,
        category: str | None = None,
        flags: int = 0,
        max_hits: int = DEFAULT_MAX_HITS,
        context: int = DEFAULT_CONTEXT,
    ) -> list[SearchHit]:
        """Regex search over document texts: up to ``max_hits`` hits of (path, char offset, snippet).

        The snippet is ``context`` characters either side of the match, with
        newlines flattened so a hit prints on one line.
        """
        rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)
        max_hits = max(0, min(int(max_hits), MAX_HITS_CAP))
        context = max(0, min(int(context), 2000))
        hits: list[SearchHit] = []
        if not max_hits:
            return hits
        for d in self.docs(folder=folder, category=category):
            text = d.text
            for m in rx.finditer(text):
                a, b = max(0, m.start() - context), min(len(text), m.end() + context)
                hits.append(SearchHit(d.path, m.start(), text[a:b].replace("\n", " ")))
                if len(hits) >= max_hits:
                    return hits
        return hits

    def __len__(self) -> int:
        return len(self._docs)

    def __repr__(self) -> str:
        return f"<Room {self.name!r}: {len(self._docs)} documents, {len(self.folders)} folders, {self.n_tokens} tokens>"
