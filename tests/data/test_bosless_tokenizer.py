"""Tokenizers without a BOS token (Qwen-style, ``bos_token: null``; trl#1885) work in every datamodule that
tokenizes: documents are ``ids <eos>`` there, with no ``None`` in any tensor. The tokenizer is the shipped zoo-lm one
saved with its BOS removed, so the test needs no download."""

import json

import pytest
import torch

from zoo.models.causal_lm import load_tokenizer

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(60))
CHAT = [
    {"messages": [{"role": "user", "content": f"question {i}?"}, {"role": "assistant", "content": f"answer {i}."}]}
    for i in range(40)
]


@pytest.fixture(scope="module")
def bosless(tmp_path_factory):
    """A local tokenizer directory whose tokenizer has ``bos_token_id is None`` (and an EOS)."""
    tok = load_tokenizer(None)
    tok.bos_token = None
    path = tmp_path_factory.mktemp("bosless")
    tok.save_pretrained(path)
    again = load_tokenizer(str(path))
    assert again.bos_token_id is None and again.eos_token_id is not None
    return str(path)


def _ids(batch_or_tensor) -> torch.Tensor:
    return batch_or_tensor["input_ids"] if isinstance(batch_or_tensor, dict) else batch_or_tensor


@pytest.mark.parametrize("mode", ["pretrain", "chat"])
def test_zoo_lm_datamodule(bosless, tmp_path, mode):
    from zoo.methods.zoo_lm.datamodule import LMDataModule

    path = tmp_path / ("train.txt" if mode == "pretrain" else "train.jsonl")
    path.write_text(TEXT if mode == "pretrain" else "".join(json.dumps(c) + "\n" for c in CHAT))
    dm = LMDataModule(mode=mode, path=str(path), tokenizer=bosless, max_length=32, batch_size=4)
    dm.setup("fit")
    ids = _ids(next(iter(dm.train_dataloader())))
    assert ids.dtype == torch.long
    every = torch.cat([e["input_ids"].flatten() for e in dm.train_set.examples + dm.val_set.examples])
    assert not (every == 1).any()  # no BOS id (1 in zoo-lm's vocabulary) was put in
    tok = load_tokenizer(bosless)
    if mode == "pretrain":  # a document is "ids <eos>"
        assert dm._document("hello") == [*tok("hello", add_special_tokens=False).input_ids, tok.eos_token_id]


def test_preference_datamodule(bosless, tmp_path):
    from zoo.data.preference import PreferenceDataModule

    rows = [
        {"prompt": f"\n\nHuman: question {i}?\n\nAssistant:", "chosen": f" yes {i}.", "rejected": f" no {i}."}
        for i in range(20)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dm = PreferenceDataModule(path=str(path), tokenizer=bosless, batch_size=4, redteam_path=None, heldout_prompts=0)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert all(v.dtype == torch.long for k, v in batch.items() if k.endswith("input_ids"))


@pytest.mark.parametrize("stage", ["copy", "grpo"])
def test_rlcracker_datamodule(bosless, tmp_path, stage):
    from zoo.methods.rlcracker.datamodule import RLCrackerDataModule

    rows = [{"question": f"what is {i}?", "watermarked": f"it is the number {i} and nothing else."} for i in range(8)]
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dm = RLCrackerDataModule(
        stage=stage,
        path=str(texts),
        val_path=str(texts),
        test_path=None,
        tokenizer=bosless,
        copy_records=16,
        copy_val=4,
        batch_size=2,
    )
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert isinstance(batch, (dict, list))


@pytest.mark.parametrize("pipeline", ["fast", "bt_chat", "bt_pretrain"])
def test_fast_datamodule_token_sequences(bosless, tmp_path, pipeline):
    from zoo.methods.fast.datamodule import FastSAEDataModule

    chat, text = tmp_path / "chat.jsonl", tmp_path / "pretrain.txt"
    chat.write_text("".join(json.dumps(c) + "\n" for c in CHAT))
    text.write_text(TEXT)
    dm = FastSAEDataModule(
        pipeline=pipeline,
        path=str(chat),
        val_path=str(chat),
        pretrain_path=[str(text)],
        block_size=16,
        ngram=3,
        harvest_tokens=None,
        activation_cache=None,
    )
    seqs = dm.train_sequences(load_tokenizer(bosless))
    assert seqs and all(torch.as_tensor(s).dtype == torch.long for s in seqs)


def test_anchor_adapter_datamodule_batches(bosless):
    from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule

    dm = AnchorAdapterDataModule(stage="midtrain", n_bench=8, n_midtrain=16, n_grpo=8, batch_size=4, max_length=32)
    dm.tokenizer = load_tokenizer(bosless)
    batch = dm._collate_lines(["1 + 2 = 3", "4 - 1 = 3"])
    assert batch["input_ids"].dtype == torch.long


def test_watchlog_decoder_prompt(bosless):
    """WatchLog's decoder prompt (a model-side tokenizer user): without a BOS it starts at the first frame marker,
    one token shorter, with the visual tokens still at their slots."""
    from zoo.methods.watchlog.decoder import PromptBuilder

    with_bos, without = PromptBuilder(load_tokenizer(None), 3), PromptBuilder(load_tokenizer(bosless), 3)
    assert without.prompt_len == with_bos.prompt_len - 1
    assert without.visual_pos == [p - 1 for p in with_bos.visual_pos]
    embed, visual = torch.nn.Embedding(8192, 4), torch.randn(2, 3, 4)
    x = without.prompt_embeds(embed, visual)
    assert x.shape == (2, without.prompt_len, 4)
    tag = embed(torch.tensor([without.markers[t][-1] for t in range(3)]))
    assert torch.allclose(x[:, without.visual_pos], visual + tag)
