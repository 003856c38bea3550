"""Train zoo-lm's byte-level BPE tokenizer and save it in Hugging Face format.

``python -m zoo.models.train_tokenizer`` rebuilds ``zoo/models/assets/zoo-lm-bpe8k/`` from the shipped text
(run ``python -m zoo.methods.zoo_lm.derived_data`` first). The result is deterministic: the corpus is read in a fixed
order and the ``tokenizers`` BPE trainer breaks ties deterministically, so a rebuild is byte-identical
(``tests/zoo_lm`` checks it on a small corpus).

Corpus (training text only): ``data/tinyshakespeare/input.txt``, ``data/alpaca-subset/alpaca_5000.txt`` and the
message contents of ``data/zoo-lm-chat/train.jsonl`` (Alpaca chat turns plus the HH-RLHF ``sft`` part). No
HH-RLHF ``preference_*`` text is read, so ShaPO's held-out pairs do not shape the vocabulary.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from zoo.core.data import read_jsonl, repo_root

VOCAB_SIZE = 8192
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (PAD, BOS, EOS, *ROLE_TOKENS)
# Each turn is "<|role|>\n" + content + "</s>"; the whole conversation starts with "<s>". The {% generation %}
# markers let transformers' ``return_assistant_tokens_mask`` find the assistant tokens (used in tests).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('zoo-lm chat template: role must be system, user or assistant, got ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
DEFAULT_TEXT_FILES = ("data/tinyshakespeare/input.txt", "data/alpaca-subset/alpaca_5000.txt")
DEFAULT_CHAT_FILES = ("data/zoo-lm-chat/train.jsonl",)
DEFAULT_OUT = Path(__file__).resolve().parent / "assets" / "zoo-lm-bpe8k"


def corpus(text_files: Iterable[str | Path], chat_files: Iterable[str | Path]) -> Iterator[str]:
    """Yield training strings: each text file's lines, then every message content of each chat JSONL file.

    Raises:
        DataError: (from ``read_jsonl``) a chat line without ``messages``.
    """
    for path in text_files:
        with open(path, encoding="utf-8") as f:
            yield from f
    for path in chat_files:
        for row in read_jsonl(path, required=("messages",)):
            for message in row["messages"]:
                yield message["content"]


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE, model_max_length: int = 2048):
    """Train a byte-level BPE (GPT-2 style pre-tokenisation, no unknown token) and wrap it for transformers.

    Args:
        texts: training strings, in a fixed order (order matters for determinism).
        vocab_size: total vocabulary including the 6 special tokens and the 256 byte symbols.
        model_max_length: recorded in ``tokenizer_config.json``.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with ``<s>``/``</s>``/``<pad>`` as bos/eos/pad, the role tokens
        as additional special tokens, and :data:`CHAT_TEMPLATE`.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),
        model_max_length=model_max_length,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    hf.chat_template = CHAT_TEMPLATE
    return hf


def main(argv: list[str] | None = None) -> None:
    """Command line: rebuild the shipped tokenizer (or one from other files with ``--text/--chat/--out``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", nargs="*", default=list(DEFAULT_TEXT_FILES), help="plain-text files")
    p.add_argument("--chat", nargs="*", default=list(DEFAULT_CHAT_FILES), help="chat JSONL files")
    p.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    p.add_argument("--out", default=str(DEFAULT_OUT))
    a = p.parse_args(argv)
    root = repo_root()
    resolve = lambda f: Path(f) if Path(f).is_absolute() else root / f
    tok = train_tokenizer(corpus(map(resolve, a.text), map(resolve, a.chat)), a.vocab_size)
    tok.save_pretrained(a.out)
    print(json.dumps({"out": a.out, "vocab_size": len(tok)}))


if __name__ == "__main__":
    main()
