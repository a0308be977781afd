"""Root-only loss masks with SmolLM2's own chat template and with TRL's GLM template."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.training.masking import IGNORE_INDEX, MaskingError, tokenize_conversation, trained_spans

pytestmark = pytest.mark.slow  # loads the embedded model's tokenizer

CONVERSATION = [
    {"role": "system", "content": "You are the root agent. The data room is `room` in a Python REPL."},
    {"role": "user", "content": "Worked example: review Acme Ltd.", "example": True},
    {"role": "assistant", "content": "```python\nprint(len(room.documents))\n```", "example": True},
    {"role": "user", "content": "41", "example": True},
    {"role": "user", "content": "Review the data room of Borealis GmbH and write a memo."},
    {"role": "assistant", "content": "```python\nfor d in room.docs():\n    print(d.path)\n```"},
    {"role": "user", "content": "01_corporate/articles.txt\n03_material_contracts/supply.txt\n"},
    {"role": "assistant", "content": "Reading the supply agreement.\n```python\n   print(room.read('03_material_contracts/supply.txt')[:500])\n```"},
    {"role": "user", "content": "SUPPLY AGREEMENT ... Section 14.2 Change of Control ..."},
    {"role": "assistant", "content": '```python\nsubmit("Change of control in supply agreement s.14.2")\n```'},
]  # fmt: skip
ROOT_TURNS = [m["content"] for m in CONVERSATION if m["role"] == "assistant" and not m.get("example")]
PROMPT_TEXTS = [m["content"] for m in CONVERSATION if m["role"] != "assistant" or m.get("example")]


@pytest.fixture(scope="module")
def tokenizer(smollm2_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_path)


@pytest.fixture(scope="module")
def glm_template() -> str:
    import trl

    path = Path(trl.__file__).parent / "chat_templates" / "glm4moe.jinja"
    assert path.exists(), f"TRL no longer ships {path}"
    return path.read_text()


def masked_text(tokenizer, ex) -> str:
    return tokenizer.decode([t for t, m in zip(ex.input_ids, ex.assistant_masks, strict=True) if not m])


def test_smollm2_template_masks_everything_but_root_turns(tokenizer):
    ex = tokenize_conversation(tokenizer, CONVERSATION)
    # Same ids as the model's own chat-template tokenization (what it sees at sampling).
    assert (
        ex.input_ids
        == tokenizer.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True)["input_ids"]
    )
    # Per-message tokenization concatenated equals the one-shot tokenization: no token straddles a turn.
    assert ex.segment_ids_match
    assert ex.labels == [
        t if m else IGNORE_INDEX for t, m in zip(ex.input_ids, ex.assistant_masks, strict=True)
    ]

    spans = [tokenizer.decode(s) for s in trained_spans(ex)]
    assert spans == [c + "<|im_end|>" for c in ROOT_TURNS]  # content + end-of-turn, nothing else
    masked = masked_text(tokenizer, ex)
    for text in PROMPT_TEXTS:  # system, task, REPL outputs and the worked example (its code too)
        assert text.strip() in masked
    assert masked.count("<|im_start|>assistant\n") == 4  # generation prompts are not trained
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    n_eot_trained = sum(1 for t, m in zip(ex.input_ids, ex.assistant_masks, strict=True) if m and t == eot)
    assert n_eot_trained == len(ROOT_TURNS)


def test_glm_template_with_smollm2_tokenizer(tokenizer, glm_template):
    ex = tokenize_conversation(tokenizer, CONVERSATION, chat_template=glm_template)
    assert ex.text.startswith("[gMASK]<sop>")
    spans = [tokenizer.decode(s) for s in trained_spans(ex)]
    # GLM renders an assistant turn as "\n<think></think>\n" + content.strip(); its end of turn is the
    # next role tag, which belongs to the next message and stays masked.
    assert spans == ["\n<think></think>\n" + c.strip() for c in ROOT_TURNS]
    masked = masked_text(tokenizer, ex)
    for text in PROMPT_TEXTS:
        assert text.strip() in masked
    assert "print(len(room.documents))" in masked  # worked-example code: masked


def test_explicit_flags_and_bad_messages(tokenizer):
    flags = [False] * len(CONVERSATION)
    assert tokenize_conversation(tokenizer, CONVERSATION, trained=flags).n_trained == 0
    with pytest.raises(MaskingError, match="message 1: role 'tool'"):
        tokenize_conversation(tokenizer, [CONVERSATION[0], {"role": "tool", "content": "x"}], where="t1")
    not_prefix = "{% for m in messages %}{{ m.content }}{% endfor %}{{ messages | length }}"
    with pytest.raises(MaskingError, match="not prefix-preserving"):
        tokenize_conversation(tokenizer, CONVERSATION, chat_template=not_prefix)
