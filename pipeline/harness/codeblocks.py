"""Fenced code blocks in a model completion: find them, in order.

The root writes its program in ```python (or ```repl, or bare ```) blocks;
the tool-loop baseline writes ```tool blocks. Completions are often cut by a
stop string at the closing fence, so a block left open at the end of the
text still counts: everything after its opening line is its body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The languages the RLM root may use for REPL code; "" is a bare ``` fence.
CODE_LANGUAGES = ("python", "py", "python3", "repl", "")

# An opening fence: three or more backticks at the start of a line, then an
# optional language tag, then the end of the line.
_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([A-Za-z0-9_+-]*)[^\n]*$", re.MULTILINE)


@dataclass
class Block:
    language: str  # lower-cased tag after the fence, "" for a bare fence
    body: str
    closed: bool  # False when the completion ended inside the block


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block in ``text`` in order, an unclosed last block included."""
    blocks: list[Block] = []
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            return blocks
        fence, lang = m.group(1), m.group(2).lower()
        body_start = m.end() + 1 if m.end() < len(text) else m.end()
        # The closing fence is the next run of as many backticks, usually on its
        # own line but sometimes glued to the last code line ("print(x)```").
        close = text.find(fence, body_start)
        if close < 0:
            blocks.append(Block(lang, text[body_start:].rstrip("\n"), closed=False))
            return blocks
        blocks.append(Block(lang, text[body_start:close].rstrip("\n"), closed=True))
        pos = close + len(fence)
        # Skip the rest of the closing fence's line so it is not read as an opening.
        nl = text.find("\n", pos)
        pos = len(text) if nl < 0 else nl + 1


def code_blocks(text: str, languages: tuple[str, ...] = CODE_LANGUAGES) -> list[str]:
    """Bodies of the blocks whose language is in ``languages`` (non-empty ones only)."""
    return [b.body for b in fenced_blocks(text) if b.language in languages and b.body.strip()]


def close_open_block(text: str) -> str:
    """The completion with a closing fence appended when it ends inside a block.

    A stop string at the closing fence removes the fence from the returned
    text; the conversation (and any training example made from it) should
    still show a well-formed block.
    """
    blocks = fenced_blocks(text)
    if blocks and not blocks[-1].closed:
        return text.rstrip("\n") + "\n```"
    return text
