"""zoo-lm data: packing, the line split, chat JSONL errors, padding."""

import json

import pytest
import torch

from zoo.core.data import DataError
from zoo.data.chat import read_conversations
from zoo.methods.zoo_lm.datamodule import LMDataModule, PadCollate, pack, split_text, validation_cut
from zoo.models.chat import IGNORE_INDEX


def test_pack_concatenates_documents_and_drops_the_tail():
    blocks = pack([[1, 10, 11, 2], [1, 12, 2], [1, 13, 14, 15, 2]], block_size=4)
    assert blocks.tolist() == [[1, 10, 11, 2], [1, 12, 2, 1], [13, 14, 15, 2]]
    assert pack([[1, 2, 3]], block_size=4).shape == (0, 4)


def test_split_text_holds_out_the_last_lines():
    text = "".join(f"line {i}\n" for i in range(10))
    head, tail = split_text(text, 0.1)
    assert head == "".join(f"line {i}\n" for i in range(9)) and tail == "line 9\n"
    assert validation_cut(40000, 0.1) == 36000 and validation_cut(7, 0.0) == 7
    assert split_text("a\nb", 0.5) == ("a\n", "b\n")


def test_pad_collate_pads_right_with_ignored_labels():
    batch = PadCollate(pad_token_id=0)(
        [
            {"input_ids": torch.tensor([5, 6, 7]), "labels": torch.tensor([-100, 6, 7])},
            {"input_ids": torch.tensor([8]), "labels": torch.tensor([8])},
        ]
    )
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 6, 7], [8, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", ":2: invalid JSON"),
        ('{"text": "x"}', ":2: messages: expected a non-empty list"),
        ('{"messages": [{"role": "user"}]}', ":2: messages[0].content: expected a string"),
        ('{"messages": [{"role": "bot", "content": "x"}]}', ":2: messages[0].role: 'bot' is not one of"),
    ],
)
def test_bad_chat_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "chat.jsonl"
    good = {"messages": [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "yes"}]}
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    with pytest.raises(DataError, match=f"chat.jsonl{message}".replace("[", r"\[").replace("]", r"\]")):
        read_conversations(path, empty_content="keep")


def _chat_file(path, n):
    with open(path, "w") as f:
        f.writelines(
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": f"Say {i}."},
                        {"role": "assistant", "content": f"{i} {i} {i}."},
                    ]
                }
            )
            + "\n"
            for i in range(n)
        )
    return str(path)


def test_chat_datamodule_splits_pads_and_drops(tmp_path):
    dm = LMDataModule(
        mode="chat", path=_chat_file(tmp_path / "c.jsonl", 20), val_fraction=0.25, batch_size=3, max_length=64
    )
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), dm.dropped) == (15, 5, 0)
    batch = next(iter(dm.train_dataloader()))
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    assert ((batch["labels"] != IGNORE_INDEX) <= batch["attention_mask"].bool()).all()
    short = LMDataModule(mode="chat", path=str(tmp_path / "c.jsonl"), val_fraction=0.25, max_length=6)
    with pytest.raises(DataError, match="no training conversations of max_length=6"):
        short.setup("fit")  # "<s><|user|>\nSay i.</s><|assistant|>" is already 8 tokens: nothing to learn
    assert short.dropped == 20


def test_pretrain_datamodule_blocks(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("".join(f"The {i}th line of plain text.\n" for i in range(200)))
    dm = LMDataModule(mode="pretrain", path=str(path), val_fraction=0.1, max_length=32, batch_size=4)
    dm.setup("fit")
    x = dm.train_set[0]
    assert x["input_ids"].shape == (32,) and torch.equal(x["input_ids"], x["labels"])
    assert x["input_ids"][0] == dm.tokenizer.bos_token_id
    assert len(dm.val_set) >= 1 and len(dm.train_set) > 5 * len(dm.val_set)


def test_bad_arguments():
    with pytest.raises(ValueError, match="data.mode"):
        LMDataModule(mode="dpo")
    with pytest.raises(DataError, match="no such file"):
        LMDataModule(mode="chat", path="missing.jsonl").setup("fit")
