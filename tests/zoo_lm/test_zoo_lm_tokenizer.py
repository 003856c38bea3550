"""zoo-lm tokenizer: lossless round trip, special tokens, chat template, deterministic training."""

import pytest

from zoo.models.causal_lm import ARCHS, TOKENIZER_DIR, load_tokenizer
from zoo.models.train_tokenizer import SPECIAL_TOKENS, train_tokenizer


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


@pytest.mark.parametrize(
    "text",
    [
        "First Citizen:\nBefore we proceed any further, hear me speak.\n",
        "  leading spaces,\ttabs and trailing  \n\n",
        "Unicode: café, naïve, 東京, emoji 🍞 — and “quotes”.",
        "",
    ],
)
def test_round_trip_is_lossless(tok, text):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


def test_vocab_and_special_ids_match_the_presets(tok):
    assert len(tok) == 8192 == ARCHS["zoo-lm-small"]["vocab_size"] == ARCHS["zoo-lm-tiny"]["vocab_size"]
    assert tok.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2, 3, 4, 5]
    for arch in ARCHS.values():
        assert (arch["pad_token_id"], arch["bos_token_id"], arch["eos_token_id"]) == (
            tok.pad_token_id,
            tok.bos_token_id,
            tok.eos_token_id,
        )
    assert tok("plain text")["input_ids"][0] != tok.bos_token_id  # no special tokens added to plain text


def test_chat_template_renders_roles_and_generation_prompt(tok):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi?"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bread?"},
    ]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<s><|system|>\nBe brief.</s><|user|>\nHi?</s><|assistant|>\nHello.</s><|user|>\nBread?</s><|assistant|>\n"
    )
    ids = tok.apply_chat_template(messages[:2], tokenize=True, return_dict=True)["input_ids"]
    assert ids[:2] == [1, 3] and ids[-1] == tok.eos_token_id and ids.count(tok.eos_token_id) == 2


def test_chat_template_refuses_unknown_roles(tok):
    with pytest.raises(Exception, match="role must be system, user or assistant"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_training_is_deterministic_and_saves_hf_files(tmp_path):
    corpus = ["To be, or not to be, that is the question:\n"] * 20 + ["Whether 'tis nobler in the mind\n"] * 20
    a, b = train_tokenizer(iter(corpus), vocab_size=300), train_tokenizer(iter(corpus), vocab_size=300)
    a.save_pretrained(tmp_path / "a")
    b.save_pretrained(tmp_path / "b")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert load_tokenizer(tmp_path / "a").chat_template == a.chat_template


def test_shipped_tokenizer_has_hf_files():
    assert {"tokenizer.json", "tokenizer_config.json"} <= {p.name for p in TOKENIZER_DIR.iterdir()}
    with pytest.raises(ValueError, match="not a directory"):
        load_tokenizer(TOKENIZER_DIR / "missing")
