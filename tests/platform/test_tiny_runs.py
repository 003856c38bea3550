"""Smoke runs never collide with real runs (#42): a ``recipes/tiny/`` overlay names its run ``<name>-tiny``, so a tiny
run between an interrupted real run and its ``resume=auto`` leaves the real run's resume alone."""

import logging
from pathlib import Path

import torch
import yaml

from zoo.cli import main
from zoo.core.recipe import load_recipe

TINY = "recipes/tiny/zoo-lm.yaml"


def test_tiny_overlay_names_the_run_name_tiny():
    assert load_recipe("zoo-lm.yaml", overlays=["tiny/zoo-lm.yaml"])["name"] == "zoo-lm-tiny"
    assert load_recipe("zoo-lm.yaml", overlays=[TINY])["name"] == "zoo-lm-tiny"  # however the overlay is named
    assert load_recipe("zoo-lm.yaml")["name"] == "zoo-lm"
    assert load_recipe("zoo-lm.yaml", ["name=mine"], [TINY])["name"] == "mine"  # a name given is taken as given


def test_tiny_run_between_a_killed_real_run_and_its_resume(tmp_path, caplog):
    # the "real" run: the tiny sizes from an overlay outside recipes/tiny/ (so it is named like the real recipe),
    # planned for 4 steps and stopped at step 2, as a kill after its step-2 checkpoint leaves it
    real_overlay = tmp_path / "my-sizes.yaml"
    real_overlay.write_text(Path(TINY).read_text())
    real = ["recipe=zoo-lm.yaml", f"overlay={real_overlay}", f"out_dir={tmp_path}", "export.formats=[]"]
    assert main(["train", *real]) == 0
    assert main(["train", "recipe=zoo-lm.yaml", f"overlay={TINY}", f"out_dir={tmp_path}", "export.formats=[]"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["zoo-lm", "zoo-lm-tiny"]
    tiny_ckpt = tmp_path / "zoo-lm-tiny" / "version_0" / "checkpoints" / "last.ckpt"
    tiny_bytes = tiny_ckpt.read_bytes()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert main(["train", *real, "resume=auto", "trainer.max_steps=4"]) == 0
    assert f"resuming {tmp_path / 'zoo-lm' / 'version_0'} at step 2" in caplog.text
    changed = [r.getMessage() for r in caplog.records if "->" in r.getMessage()]
    assert len(changed) == 1 and "trainer.max_steps: 2 -> 4" in changed[0], changed  # no diff against a tiny run
    run = tmp_path / "zoo-lm" / "version_0"
    assert [p.name for p in (tmp_path / "zoo-lm").iterdir()] == ["version_0"]
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    assert yaml.safe_load((run / "config.yaml").read_text())["name"] == "zoo-lm"
    assert tiny_ckpt.read_bytes() == tiny_bytes, "the resume touched the tiny run"
