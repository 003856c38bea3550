"""``resume`` says what it does (#14 item 2): where it continues, that it starts fresh, that a finished run has
nothing to train and how to extend it, and that ``init_from`` yields to the checkpoint instead of failing."""
import json
import logging

import torch

from zoo.cli import main

RECIPE = "tests/platform/recipes/digits.yaml"


def _common(tmp_path):
    return [f"recipe={RECIPE}", f"out_dir={tmp_path}", "trainer.max_epochs=-1", "data.batch_size=8",
            "logger.kind=none", "export.formats=[]"]


def test_resume_auto_without_a_run_says_it_starts_fresh(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert main(["train", *_common(tmp_path), "trainer.max_steps=2", "resume=auto"]) == 0
    assert f"no run of digits under {tmp_path / 'digits'} to resume: starting fresh" in caplog.text


def test_resume_messages_finished_run_and_init_from(tmp_path, caplog):
    assert main(["train", *_common(tmp_path), "trainer.max_steps=2"]) == 0
    run = tmp_path / "digits" / "version_0"
    last = run / "checkpoints" / "last.ckpt"
    before = json.loads((run / "metrics.json").read_text())["metrics"]
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert main(["train", *_common(tmp_path), "trainer.max_steps=2", "resume=auto"]) == 0
    assert "already finished at step 2 (trainer.max_steps=2): nothing to train" in caplog.text
    assert json.loads((run / "metrics.json").read_text())["metrics"] == before  # a resume that trains nothing keeps them
    assert any(k.startswith("val/") for k in before), before
    assert "raise trainer.max_steps" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):  # init_from with resume: the run's checkpoint wins
        assert main(["train", *_common(tmp_path), "trainer.max_steps=4", "resume=auto", f"init_from={last}"]) == 0
    assert f"resuming {run} at step 2" in caplog.text
    assert f"init_from={last} ignored" in caplog.text
    assert torch.load(last, weights_only=True)["global_step"] == 4
    assert sorted(p.name for p in (tmp_path / "digits").iterdir()) == ["version_0"]
