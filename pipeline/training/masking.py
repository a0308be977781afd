"""Chat-template tokenization of a root conversation with root-only loss masks.

Most chat templates (SmolLM2's among them) carry no ``{% generation %}``
markers, so ``return_assistant_tokens_mask`` cannot be used. Instead the
conversation is rendered incrementally: the text of message ``i`` is what
``render(messages[:i+1])`` adds to ``render(messages[:i])``, and a trained
assistant turn is what ``render(messages[:i+1])`` adds to
``render(messages[:i], add_generation_prompt=True)`` — its content plus the
template's end-of-turn token, without the generation prompt (which the model is
given at sampling, not asked to write) and without whitespace the template
puts after the end-of-turn token. The whole text is tokenized once, as at
sampling time, and each token is labelled by where its first character lies.

``segment_ids_match`` says whether tokenizing each message's text separately
and concatenating gives the same ids as the one-shot tokenization; when it
does, no token straddles a role boundary and the mask is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

IGNORE_INDEX = -100
ROLES = ("system", "user", "assistant")


class MaskingError(ValueError):
    """A conversation or chat template the masks cannot be built for."""


@dataclass
class Segment:
    """The rendered text of one message (or the template's closing text)."""

    text: str
    message_index: int | None  # None: text the template adds after the last message
    trained: bool
    # For trained segments: [start, end) of the trained characters within ``text``.
    trained_start: int = 0
    trained_end: int = 0


@dataclass
class TokenizedExample:
    input_ids: list[int]
    labels: list[int]
    assistant_masks: list[int]  # 1 where the token is trained, else 0
    text: str
    segments: list[Segment] = field(default_factory=list)
    segment_ids_match: bool = True

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def n_trained(self) -> int:
        return sum(self.assistant_masks)


def trained_flags(messages: Sequence[dict[str, Any]]) -> list[bool]:
    """Which messages are the root's own turns: assistant messages that are not worked examples."""
    return [m.get("role") == "assistant" and not m.get("example", False) for m in messages]


def _clean(messages: Sequence[dict[str, Any]], where: str) -> list[dict[str, str]]:
    out = []
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role not in ROLES:
            raise MaskingError(f"{where}: message {i}: role {role!r} is not one of {ROLES}")
        if not isinstance(content, str):
            raise MaskingError(
                f"{where}: message {i}: content must be a string, got {type(content).__name__}"
            )
        # Only role and content reach the template; our own keys ("example") stay out of it.
        out.append({"role": role, "content": content})
    return out


def render_segments(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    chat_template: str | None = None,
    trained: Sequence[bool] | None = None,
    where: str = "conversation",
) -> list[Segment]:
    """Split the template's rendering of ``messages`` into one text segment per message."""
    msgs = _clean(messages, where)
    flags = list(trained) if trained is not None else trained_flags(messages)
    if len(flags) != len(msgs):
        raise MaskingError(f"{where}: {len(flags)} trained flags for {len(msgs)} messages")

    def render(upto: int, gen: bool = False) -> str:
        if upto == 0 and not gen:
            return ""
        return tokenizer.apply_chat_template(
            msgs[:upto], tokenize=False, add_generation_prompt=gen, chat_template=chat_template
        )

    full = render(len(msgs))
    segments: list[Segment] = []
    prev = ""
    for i in range(len(msgs)):
        cur = render(i + 1)
        if not cur.startswith(prev) or not full.startswith(cur):
            raise MaskingError(
                f"{where}: the chat template is not prefix-preserving at message {i} ({msgs[i]['role']}): "
                "rendering more messages changes the text of earlier ones, so per-turn masks are undefined"
            )
        seg = Segment(text=cur[len(prev) :], message_index=i, trained=flags[i])
        if flags[i]:
            with_prompt = render(i, gen=True)
            if not with_prompt.startswith(prev) or not cur.startswith(with_prompt):
                raise MaskingError(
                    f"{where}: message {i}: the template's generation prompt is not a prefix of the rendered "
                    "assistant turn, so the assistant's own tokens cannot be located"
                )
            body = cur[len(with_prompt) :]
            seg.trained_start = len(with_prompt) - len(prev)
            # Whitespace after the end-of-turn token is template glue, not something the model writes.
            seg.trained_end = seg.trained_start + len(body.rstrip())
        segments.append(seg)
        prev = cur
    if len(full) > len(prev):
        segments.append(Segment(text=full[len(prev) :], message_index=None, trained=False))
    return segments


def tokenize_conversation(
    tokenizer: Any,
    messages: Sequence[dict[str, Any]],
    chat_template: str | None = None,
    trained: Sequence[bool] | None = None,
    where: str = "conversation",
) -> TokenizedExample:
    """input_ids, labels (-100 outside the root's own turns) and assistant_masks for one conversation."""
    segments = render_segments(tokenizer, messages, chat_template, trained, where)
    text = "".join(s.text for s in segments)
    # Character spans that are trained, in full-text coordinates.
    spans: list[tuple[int, int]] = []
    pos = 0
    for s in segments:
        if s.trained and s.trained_end > s.trained_start:
            spans.append((pos + s.trained_start, pos + s.trained_end))
        pos += len(s.text)

    # The chat template already wrote every special token (BOS included where the model has one).
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    offsets = enc["offset_mapping"]
    masks = []
    k = 0
    for start, end in offsets:
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        inside = k < len(spans) and spans[k][0] <= start < spans[k][1]
        # Zero-width tokens (none in byte-level BPE, but some tokenizers emit them) follow their neighbour.
        if end == start and masks:
            inside = bool(masks[-1])
        masks.append(1 if inside else 0)
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, masks, strict=True)]

    seg_ids: list[int] = []
    for s in segments:
        seg_ids += tokenizer(s.text, add_special_tokens=False)["input_ids"]
    return TokenizedExample(
        input_ids=ids,
        labels=labels,
        assistant_masks=masks,
        text=text,
        segments=segments,
        segment_ids_match=seg_ids == ids,
    )


def trained_spans(example: TokenizedExample) -> list[list[int]]:
    """The runs of consecutive trained token ids, in order (for inspection and tests)."""
    runs: list[list[int]] = []
    prev = 0
    for tok, m in zip(example.input_ids, example.assistant_masks, strict=True):
        if m and not prev:
            runs.append([])
        if m:
            runs[-1].append(tok)
        prev = m
    return runs
