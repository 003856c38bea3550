"""Assistant-only loss mask of chat SFT on hand-made conversations."""

import pytest

from zoo.models.causal_lm import load_tokenizer
from zoo.models.chat import IGNORE_INDEX, assistant_spans, encode_chat


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


CONV = [
    {"role": "user", "content": "How do I bake bread?"},
    {"role": "assistant", "content": "Mix flour, water and yeast."},
    {"role": "user", "content": "Then?"},
    {"role": "assistant", "content": "Bake it."},
]


def test_only_assistant_replies_and_their_end_token_are_targets(tok):
    enc = encode_chat(tok, CONV)
    ids, labels = enc["input_ids"], enc["labels"]
    assert ids == tok.apply_chat_template(CONV, tokenize=True, return_dict=True)["input_ids"]
    kept = [i for i, lab in zip(ids, labels) if lab != IGNORE_INDEX]
    assert all(lab in (IGNORE_INDEX, i) for i, lab in zip(ids, labels))
    assert tok.decode(kept) == "Mix flour, water and yeast.</s>Bake it.</s>"
    # the two supervised runs are exactly the replies: the tokens before them are "<|assistant|>", "\n"
    first = next(t for t, lab in enumerate(labels) if lab != IGNORE_INDEX)
    assert tok.convert_ids_to_tokens(ids[first - 2 : first]) == ["<|assistant|>", "Ċ"]


def test_mask_agrees_with_transformers_generation_markers(tok):
    ref = tok.apply_chat_template(CONV, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ours = [int(lab != IGNORE_INDEX) for lab in encode_chat(tok, CONV)["labels"]]
    assert ours == ref["assistant_masks"]


def test_spans_and_truncation(tok):
    text, spans = assistant_spans(tok, CONV)
    assert [text[s:e] for s, e in spans] == ["Mix flour, water and yeast.</s>", "Bake it.</s>"]
    short = encode_chat(tok, CONV, max_length=5)
    assert len(short["input_ids"]) == 5 and all(lab == IGNORE_INDEX for lab in short["labels"])


def test_bad_conversations_raise(tok):
    with pytest.raises(ValueError, match="must not start with an assistant"):
        encode_chat(tok, [{"role": "assistant", "content": "hi"}])
    with pytest.raises(ValueError, match="empty conversation"):
        encode_chat(tok, [])


def test_template_that_is_not_prefix_consistent_is_refused(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    other = load_tokenizer(tmp_path)
    other.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}{{ messages | length }}"
    with pytest.raises(ValueError, match="prefixes"):
        encode_chat(other, CONV)
