"""``resume`` says what it does (#14 item 2): where it continues, that it starts fresh, that a finished run has
nothing to train and how to extend it, and that ``init_from`` yields to the checkpoint instead of failing."""

import json
import logging
import warnings
from types import SimpleNamespace

import torch

from zoo.cli import main

RECIPE = "tests/platform/recipes/digits.yaml"


def _common(tmp_path):
    return [
        f"recipe={RECIPE}",
        f"out_dir={tmp_path}",
        "trainer.max_epochs=-1",
        "data.batch_size=8",
        "logger.kind=none",
        "export.formats=[]",
    ]


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
    assert (
        json.loads((run / "metrics.json").read_text())["metrics"] == before
    )  # a resume that trains nothing keeps them
    assert any(k.startswith("val/") for k in before), before
    assert "raise trainer.max_steps" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):  # init_from with resume: the run's checkpoint wins
        assert main(["train", *_common(tmp_path), "trainer.max_steps=4", "resume=auto", f"init_from={last}"]) == 0
    assert f"resuming {run} at step 2" in caplog.text
    assert f"init_from={last} ignored" in caplog.text
    assert torch.load(last, weights_only=True)["global_step"] == 4
    assert sorted(p.name for p in (tmp_path / "digits").iterdir()) == ["version_0"]


def test_resume_keeps_save_top_k_and_lists_the_best_checkpoint(tmp_path, caplog):
    # last.ckpt at max_steps is written before the validation that picks that step's best checkpoint: it must still
    # know that file, else a resume lists no best and keeps a second one beside the next (save_top_k: 1)
    common = [*_common(tmp_path), "trainer.val_check_interval=2"]
    assert main(["train", *common, "trainer.max_steps=2"]) == 0
    ckdir = tmp_path / "digits" / "version_0" / "checkpoints"
    with caplog.at_level(logging.INFO, logger="zoo"):  # nothing to train: the summary still names the best
        assert main(["train", *common, "trainer.max_steps=2", "resume=auto"]) == 0
    assert "checkpoints: best by val/acc" in caplog.text and "best-000-0000002.ckpt, last.ckpt" in caplog.text
    with warnings.catch_warnings(record=True) as seen:  # zoo's sampler replays the epoch's order: no warning
        warnings.simplefilter("always")
        assert main(["train", *common, "trainer.max_steps=4", "resume=auto"]) == 0
    assert not [w for w in seen if "your dataloader is not resumable" in str(w.message)]
    assert len(list(ckdir.glob("best-*.ckpt"))) == 1, sorted(p.name for p in ckdir.iterdir())


def test_nothing_trained_says_only_what_applies(tmp_path, caplog):
    from zoo.core.resume import nothing_trained

    with caplog.at_level(logging.INFO, logger="zoo"):  # a method that takes no step (praxis): no max_steps involved
        nothing_trained(SimpleNamespace(max_steps=-1, global_step=0, current_epoch=1, max_epochs=1), tmp_path)
    assert "trainer.max_epochs=1 epoch(s) were done; to train further raise trainer.max_epochs" in caplog.text
    assert "max_steps" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):
        nothing_trained(SimpleNamespace(max_steps=8, global_step=5, current_epoch=1, max_epochs=1), tmp_path)
    assert "an epoch that max_steps cut short counts as finished" in caplog.text


def test_a_resume_saves_its_changes_to_config_yaml(tmp_path, caplog):
    assert main(["train", *_common(tmp_path), "trainer.max_steps=2"]) == 0
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert main(["train", *_common(tmp_path), "trainer.max_steps=4", "resume=auto"]) == 0
        assert "differs from the saved config.yaml at trainer.max_steps: 2 -> 4" in caplog.text
        caplog.clear()
        assert main(["train", *_common(tmp_path), "trainer.max_steps=4", "resume=auto"]) == 0
    assert "differs from the saved config.yaml" not in caplog.text and "nothing to train" in caplog.text
    assert "max_steps: 4" in (tmp_path / "digits" / "version_0" / "config.yaml").read_text()
