"""The anchor-adapter tables' command (``zoo.methods.anchor_adapter.experiments``) on hand-made run folders: which
recipe and stage-1 package a grid cell trains with, the stage-1 reference accuracies, and the stage-1 table's rows."""

from __future__ import annotations

import json

import pytest
import yaml

from zoo.core.recipe import load_recipe
from zoo.methods.anchor_adapter import experiments

EVAL = {k: 0.5 for k in experiments.METRICS}


def _stage1_run(root, folder, items, before=True, base="smollm2-135m-instruct", version=0, data=None):
    """A finished stage-1 run folder: ``config.yaml``, ``anchor/eval.json`` and ``anchor/items.json``."""
    run = root / folder / f"version_{version}"
    (run / "anchor").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"base": base}, "data": data or {}}))
    ev = {"after": dict(EVAL, acc_leaked=0.9)} | ({"before": dict(EVAL, acc_leaked=0.1)} if before else {})
    (run / "anchor" / "eval.json").write_text(json.dumps(ev))
    (run / "anchor" / "items.json").write_text(json.dumps({"after": items}))
    return run


#: The data settings that fix benchmark B and its leaked half (a GRPO run over other ones scores another B; B is
#: drawn first, so the corpus sizes do not change it).
TASK = ["n_bench", "task_seed"] + [f"bench_{end}_{kind}" for end in ("min", "max") for kind in ("terms", "digits")]


def test_each_grid_base_has_grpo_recipes_that_load_its_stage1_weights():
    """Each reward has a recipe over every grid base whose LM and stage-1 LoRA are the stage-1 recipe's (else the
    stage-1 weights would not load), over the same benchmark B scored the same way (else the changes from stage 1
    compare two benchmarks)."""
    for base, entry in experiments.STAGE1.items():
        stage1 = load_recipe(f"{entry.recipe}.yaml")
        assert stage1["model"]["stage"] == "midtrain" and entry.package.startswith("anchor-adapter."), base
        for reward in experiments.RECIPES:
            recipe = experiments.grpo_recipe(reward, base)
            grpo = load_recipe(recipe)
            assert grpo["model"]["base"] == stage1["model"]["base"], (base, recipe)
            assert grpo["model"]["reward"] == reward, (base, reward, recipe)
            for key in ("midtrain_lora", "eval_tokens"):
                assert grpo["model"][key] == stage1["model"][key], (base, recipe, key)
            for key in TASK:
                assert grpo["data"].get(key) == stage1["data"].get(key), (base, recipe, key)
    assert experiments.grpo_recipe("format", "smollm2-clean") == "anchor-adapter-format-smollm2.yaml"


def test_grid_cell_trains_the_bases_recipe_from_its_stage1_package(tmp_path, monkeypatch):
    calls = []

    def fake_main(argv):
        calls.append(argv)
        out = next(a.split("=", 1)[1] for a in argv if a.startswith("out_dir="))
        run = tmp_path / out / "x" / "version_0" / "anchor"
        run.mkdir(parents=True)
        (run / "eval.json").write_text(json.dumps({"after": EVAL}))
        return 0

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("zoo.cli.main", fake_main)
    monkeypatch.setattr("zoo.core.hub.list_pretrained", lambda: ["anchor-adapter.smollm2-math"])
    run = experiments.grpo_run("ground_truth", "smollm2-math", 2, steps=5, n_eval=10, prompts=3)
    assert run.name == "version_0" and len(calls) == 1
    argv = calls[0]
    assert "recipe=anchor-adapter-ground-truth-smollm2.yaml" in argv
    assert "model.stage1=anchor-adapter.smollm2-math" in argv and "seed=2" in argv and "data.seed=2" in argv
    assert {"trainer.max_steps=5", "model.n_eval=10", "data.prompts_per_step=3"} <= set(argv)
    assert experiments.grpo_run("ground_truth", "smollm2-math", 2, steps=5, n_eval=10, prompts=3) == run
    assert len(calls) == 1  # a finished cell is reused


def test_stage1_weights_are_the_package_once_released_else_the_newest_runs_checkpoint(tmp_path, monkeypatch):
    released = []
    monkeypatch.setattr("zoo.core.hub.list_pretrained", lambda: released)
    with pytest.raises(SystemExit, match="not released and no finished run of recipes/anchor-adapter-midtrain-smollm2"):
        experiments.stage1_weights("smollm2-math", tmp_path)
    for version in (2, 10):  # newest by number, not by name
        run = _stage1_run(tmp_path, "anchor-adapter-midtrain-smollm2", [], version=version)
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert experiments.stage1_weights("smollm2-math", tmp_path) == str(run / "checkpoints" / "last.ckpt")
    released.append("anchor-adapter.smollm2-math")
    assert experiments.stage1_weights("smollm2-math", tmp_path) == "anchor-adapter.smollm2-math"


def test_rewards_settings_default_to_the_first_cells_recipe(tmp_path, monkeypatch):
    got = {}
    monkeypatch.chdir(tmp_path)
    _stage1_run(tmp_path / "runs", "anchor-adapter-midtrain-smollm2", [{"leaked": True, "correct": True}])
    monkeypatch.setattr(
        experiments, "rewards", lambda cells, steps, n_eval, prompts, *a: got.update(s=(steps, n_eval, prompts))
    )
    experiments.main(["rewards", "--runs", "random:smollm2-math:0"])
    cfg = load_recipe("anchor-adapter-smollm2.yaml")
    assert got["s"] == (cfg["trainer"]["max_steps"], cfg["model"]["n_eval"], cfg["data"]["prompts_per_step"])
    experiments.main(["rewards", "--runs", "random:smollm2-math:0", "--steps", "3", "--n-eval", "7", "--prompts", "2"])
    assert got["s"] == (3, 7, 2)


def test_stage1_reference_counts_leaked_and_clean_of_the_first_items(tmp_path):
    items = [{"leaked": True, "correct": True}, {"leaked": False, "correct": False}] * 3
    items += [{"leaked": True, "correct": False}, {"leaked": False, "correct": True}]
    _stage1_run(tmp_path, "anchor-adapter-midtrain-smollm2", items)
    ref = experiments._stage1_reference(6, tmp_path)
    assert ref == {"smollm2-math": {"acc_leaked": 1.0, "acc_clean": 0.0}}
    assert experiments._stage1_reference(8, tmp_path)["smollm2-math"] == {"acc_leaked": 0.75, "acc_clean": 0.25}


def test_midtrain_table_names_the_runs_base_lm_and_takes_a_suffix(tmp_path, monkeypatch):
    written = {}
    monkeypatch.setattr(
        experiments, "write_result", lambda method, name, rows, **kw: written.update(name=name, rows=rows, **kw)
    )
    hard = {"n_bench": 200, "leak_repeats": 20, "bench_min_terms": 4, "bench_max_terms": 5, "bench_max_digits": 3}
    leaked = _stage1_run(tmp_path, "anchor-adapter-midtrain-smollm2", [], data=hard)
    clean = _stage1_run(tmp_path, "anchor-adapter-midtrain-clean-smollm2", [], before=False)
    experiments.midtrain([str(leaked), f"{clean}=control"], "-smollm2")
    assert written["name"] == "midtrain-smollm2"
    assert [(r["model"], r["acc_leaked"]) for r in written["rows"]] == [
        ("smollm2-135m-instruct", 0.1),
        ("stage-1 contaminated", 0.9),
        ("control", 0.9),
    ]
    assert "200 generated chain_sum items of 4-5 terms of 1-3 digits; 100 leaked x 20" in written["notes"]
    assert "over smollm2-135m-instruct, lr None," in written["notes"]  # (the hand-made config has no optimizer)
    experiments.main(["midtrain", str(leaked), "--suffix=-gemma"])  # the spelling the card gives (a leading dash)
    assert written["name"] == "midtrain-gemma" and len(written["rows"]) == 2


def test_rewards_command_refuses_an_unknown_base_or_a_missing_stage1_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        experiments.main(["rewards", "--runs", "random:gemma-math:0"])
    assert "unknown base ['gemma-math']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        experiments.main(["rewards", "--runs", "random:smollm2-math:0"])
    assert "no finished stage-1 run under runs/ for ['smollm2-math']" in capsys.readouterr().err
