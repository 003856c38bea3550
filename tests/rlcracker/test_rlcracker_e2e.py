"""User JSONL checks, stage-0 / stage-1 tiny runs, and training without any detector."""

import json

import pytest
import torch

from zoo.cli import main
from zoo.core.data import DataError
from zoo.methods.rlcracker import watermark
from zoo.methods.rlcracker.baselines import minilm_swap, random_substitution
from zoo.methods.rlcracker.datamodule import RLCrackerDataModule
from zoo.models.causal_lm import load_tokenizer

GOOD = {"question": "Name a colour.", "watermarked": "Red is a colour."}


def _write(tmp_path, lines):
    p = tmp_path / "mine.jsonl"
    p.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(p)


@pytest.mark.parametrize(
    "bad,match",
    [
        ("{not json", r"mine.jsonl:2: invalid JSON"),
        ({"question": "q"}, r"mine.jsonl:2: .*watermarked"),
        ({"question": "q", "watermarked": "   "}, r"mine.jsonl:2: key 'watermarked' is empty"),
        ({"question": "", "watermarked": "text"}, r"mine.jsonl:2: key 'question' is empty"),
        ({"question": "q", "watermarked": "word " * 300}, r"mine.jsonl:2: key 'watermarked' has \d+ tokens"),
    ],
)
def test_bad_user_rows_name_file_line_and_key(tmp_path, bad, match):
    path = _write(tmp_path, [GOOD, bad])
    with pytest.raises(DataError, match=match):
        RLCrackerDataModule(path=path, val_path=path, test_path=None)


def test_user_rows_load(tmp_path):
    path = _write(tmp_path, [GOOD, GOOD])
    dm = RLCrackerDataModule(path=path, val_path=path, test_path=None, batch_size=2)
    assert next(iter(dm.train_dataloader()))[0]["watermarked"] == GOOD["watermarked"]


def test_baselines_change_text_at_their_rate():
    tok = load_tokenizer()
    text = ["The quick brown fox jumps over the lazy dog near the river bank today."]
    g = torch.Generator().manual_seed(0)
    assert random_substitution(text, tok, 0.0, g) == text
    assert random_substitution(text, tok, 1.0, g) != text
    assert minilm_swap(text, 0.0, g) == text
    swapped = minilm_swap(text, 1.0, g, vocabulary=["cat", "wolf", "quickly"])
    assert swapped != text and len(swapped[0].split()) == len(text[0].split())


def test_copy_stage_tiny(tmp_path):
    assert (
        main(["train", "recipe=rlcracker-copy.yaml", "overlay=recipes/tiny/rlcracker-copy.yaml", f"out_dir={tmp_path}"])
        == 0
    )


def test_grpo_tiny_trains_with_the_detector_patched_to_raise(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the attacker's training used the watermark")

    for name in ("z_score", "green_mask", "green_flags", "detect", "processor"):
        monkeypatch.setattr(watermark.Watermark, name, boom)
    monkeypatch.setattr(watermark.KGW, "green_mask", boom)
    monkeypatch.setattr(watermark.Unigram, "green_mask", boom)
    assert (
        main(
            [
                "train",
                "recipe=rlcracker.yaml",
                "overlay=recipes/tiny/rlcracker.yaml",
                f"out_dir={tmp_path}",
                "model.report_samples=0",
            ]
        )
        == 0
    )


def test_grpo_tiny_end_to_end_with_report(tmp_path, capsys):
    assert main(["train", "recipe=rlcracker.yaml", "overlay=recipes/tiny/rlcracker.yaml", f"out_dir={tmp_path}"]) == 0
    assert "held-out removal" in capsys.readouterr().out


def test_predict_refuses_an_empty_text_before_generating(tmp_path):
    from zoo.core.errors import UserError
    from zoo.methods.rlcracker.module import RLCrackerModule

    empty = tmp_path / "empty.txt"
    empty.write_text(" \n")
    with pytest.raises(UserError, match="empty.txt: no text to rewrite"):
        RLCrackerModule.predict_record(None, [str(empty)])  # fails before the module is touched
