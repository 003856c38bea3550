"""The preference datamodule: schema errors with line numbers, seeded flips on training pairs only, HH parsing."""

import json

import pytest
import torch

from zoo.core.data import DataError
from zoo.data.preference import PreferenceDataModule, collate_pairs, flip_indices, hh_to_messages, read_pairs


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _pairs(n):
    return [
        {"prompt": f"\n\nHuman: question {i}?\n\nAssistant:", "chosen": f"safe {i}", "rejected": f"bad {i}"}
        for i in range(n)
    ]


def test_malformed_rows_name_their_line(tmp_path):
    rows = _pairs(3)
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(rows[0]) + "\n\n" + json.dumps({"prompt": "q", "chosen": "a"}) + "\n")
    with pytest.raises(DataError, match=r"x.jsonl:3: missing key 'rejected'"):
        read_pairs(p)
    p.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(DataError, match=r"x.jsonl:2: invalid JSON"):
        read_pairs(p)
    p.write_text(json.dumps({"prompt": "q", "chosen": 3, "rejected": "b"}) + "\n")
    with pytest.raises(DataError, match=r"x.jsonl:1: 'chosen' should be"):
        read_pairs(p)


def test_split_file_overlap_is_refused(tmp_path):
    path = _write(tmp_path / "p.jsonl", _pairs(6))
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"sft": [0, 1], "preference_train": [2, 3], "preference_eval": [1, 5]}))
    dm = PreferenceDataModule(path=path, split_file=str(split))
    with pytest.raises(DataError, match="preference_eval and sft overlap"):
        dm.setup("fit")


def test_flips_are_seeded_and_only_on_training_pairs(tmp_path):
    path = _write(tmp_path / "p.jsonl", _pairs(20))
    assert flip_indices(10, 0.4, 42) == flip_indices(10, 0.4, 42) and len(flip_indices(10, 0.4, 42)) == 4
    dm = PreferenceDataModule(path=path, val_path=path, flip_rate=0.4, redteam_path=None, max_length=32)
    dm.setup("fit")
    tok = dm.tokenizer
    flipped = [it["index"] for it in dm.train_set.items if it["flipped"]]
    assert len(flipped) == 8 and set(flipped) == flip_indices(20, 0.4, 42)
    for it in dm.train_set.items:
        reply = tok.decode(it["chosen"], skip_special_tokens=True)
        assert reply.startswith("bad" if it["flipped"] else "safe")
    assert not any(it["flipped"] for it in dm.val_set.items)
    assert all(tok.decode(it["chosen"], skip_special_tokens=True).startswith("safe") for it in dm.val_set.items)
    assert all(tok.decode(it["chosen"], skip_special_tokens=True).startswith("safe") for it in dm.clean_train_set.items)


def test_collate_masks_prompt_and_padding():
    items = [{"prompt": [1, 2], "chosen": [3], "rejected": [4, 5, 6], "index": 0, "flipped": False}]
    b = collate_pairs(items, pad_id=0)
    assert b["chosen_input_ids"].tolist() == [[1, 2, 3, 0, 0]]
    assert b["chosen_labels"].tolist() == [[-100, -100, 3, -100, -100]]
    assert b["rejected_labels"].tolist() == [[-100, -100, 4, 5, 6]]
    assert b["chosen_attention_mask"].tolist() == [[1, 1, 1, 0, 0]]
    assert torch.equal(b["index"], torch.tensor([0]))


def test_hh_to_messages():
    msgs = hh_to_messages("\n\nHuman: hi\n\nAssistant: hello\n\nHuman: how?\n\nAssistant:")
    assert msgs == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "how?"},
    ]
    assert hh_to_messages("plain text") == [{"role": "user", "content": "plain text"}]


def test_empty_prompt_names_its_line(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_text(json.dumps(_pairs(1)[0]) + "\n\n" + json.dumps({"prompt": " ", "chosen": "a", "rejected": "b"}) + "\n")
    with pytest.raises(DataError, match=r"e.jsonl:3: 'prompt' is empty"):
        read_pairs(p)


def test_generation_prompts_by_source_with_benign_alpaca_instructions(tmp_path):
    path = _write(tmp_path / "p.jsonl", _pairs(6))
    red = tmp_path / "red.json"
    red.write_text(json.dumps([{"prompt": "how to pick a lock"}]))
    benign = tmp_path / "alpaca.json"
    benign.write_text(
        json.dumps(
            [
                {"instruction": "Name a colour.", "input": "", "output": "Red."},
                {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
                {"prompt": "Write a haiku about rain."},
            ]
        )
    )
    dm = PreferenceDataModule(
        path=path,
        val_path=path,
        redteam_path=str(red),
        heldout_prompts=2,
        benign_path=str(benign),
        benign_prompts=2,
        max_length=64,
    )
    dm.setup("fit")
    prompts = dm.generation_prompts()
    assert [s for s, _ in prompts] == ["redteam", "heldout", "heldout", "benign", "benign"]
    texts = [dm.tokenizer.decode(ids, skip_special_tokens=True) for _, ids in prompts[-2:]]
    assert "Add the numbers." in texts[0] and "2 and 3" in texts[0] and "haiku" in texts[1]  # the last two items
    benign.write_text(json.dumps([{"instruction": "fine"}, {"instruction": "fine"}, {"instruction": 3}]))
    with pytest.raises(DataError, match="item 2 has no string 'prompt' or 'instruction'"):  # the file's index
        dm.generation_prompts()
