"""README promises that hold from any directory (#14 item 7): shipped data paths in recipes resolve against the
project, the user's override paths against the current directory."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from zoo.core.data import repo_root
from zoo.core.recipe import load_recipe


def test_shipped_paths_anchor_to_project_user_paths_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_recipe("praxis.yaml")
    assert os.path.isabs(cfg["data"]["path"]) and os.path.exists(cfg["data"]["path"])
    assert load_recipe("praxis.yaml", ["data.path=mine.csv"])["data"]["path"] == "mine.csv"
    # outputs are never anchored, even when the project has a folder of that name: runs land under the cwd
    (tmp_path / "overlay.yaml").write_text("out_dir: data\n")
    assert load_recipe("praxis.yaml", overlays=[str(tmp_path / "overlay.yaml")])["out_dir"] == "data"


def test_train_runs_from_another_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(repo_root()))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zoo.cli",
            "train",
            "recipe=praxis.yaml",
            "overlay=tiny/praxis.yaml",
            f"out_dir={tmp_path / 'runs'}",
            "export.formats=[]",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "runs" / "praxis-tiny" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_predict_inputs_naming_shipped_examples_resolve_to_the_project(tmp_path, monkeypatch):
    from zoo.core.commands import _shipped_or_given

    monkeypatch.chdir(tmp_path)
    example = "data/mortality-distributions/desi_example_row.csv"  # a card's `zoo predict` example
    assert _shipped_or_given(example) == str(repo_root() / example)
    assert (
        _shipped_or_given("my.csv") == "my.csv" and _shipped_or_given("How do I bake bread?") == "How do I bake bread?"
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "desi_example_row.csv").write_text("x\n")  # a user's own data/ folder wins
    assert _shipped_or_given("data/desi_example_row.csv") == "data/desi_example_row.csv"


def test_method_readers_of_shipped_files_work_from_another_directory(tmp_path, monkeypatch):
    from zoo.data.preference import DEFAULT_PAIRS, DEFAULT_SPLIT
    from zoo.methods.pooled_reps.datamodule import ALPACA, _alpaca, _hh_eval

    monkeypatch.chdir(tmp_path)
    assert len(_alpaca(ALPACA, range(3), "alpaca-heldout")) == 3
    assert _hh_eval(DEFAULT_PAIRS, DEFAULT_SPLIT)


def _user_files(folder, *names):
    for n in names:
        (folder / n).write_text("x\n")


@pytest.mark.parametrize("recipe,keys", [("praxis.yaml", ["path"]), ("zoo-lm-chat.yaml", ["path", "val_path"])])
def test_command_line_paths_are_recorded_absolute(tmp_path, monkeypatch, recipe, keys):
    """``data.path=my.csv`` names the file in the cwd; the composed recipe (so the run's config.yaml) holds its
    absolute path, so eval / predict / export of the run work from any directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    _user_files(tmp_path / "sub", *(f"my_{k}.file" for k in keys))
    cfg = load_recipe(recipe, [f"data.{k}=sub/my_{k}.file" for k in keys])
    for k in keys:
        assert cfg["data"][k] == str(tmp_path / "sub" / f"my_{k}.file")
    assert cfg["name"] == f"{cfg['method']}-my_path"  # still named after the user's file
    # a path that does not exist stays as typed (validation names it as the user wrote it)
    assert load_recipe(recipe, ["data.path=missing.file"])["data"]["path"] == "missing.file"


def test_shipped_paths_typed_in_the_project_root_keep_their_form(monkeypatch):
    monkeypatch.chdir(repo_root())
    shipped = "data/treefarms-binary/monk2.csv"
    assert load_recipe("praxis.yaml")["data"]["path"] == "data/treefarms-binary/compas_binned.csv"
    assert load_recipe("praxis.yaml", [f"data.path={shipped}"])["data"]["path"] == shipped


def test_saved_recipe_overrides_are_recorded_absolute(tmp_path, monkeypatch):
    from zoo.core.recipe import apply_overrides_checked

    monkeypatch.chdir(tmp_path)
    _user_files(tmp_path, "rows.csv")
    cfg = load_recipe("praxis.yaml")
    apply_overrides_checked(cfg, ["data.path=rows.csv"])  # zoo eval / export RUN data.path=rows.csv
    assert cfg["data"]["path"] == str(tmp_path / "rows.csv")


def test_run_on_user_data_evaluates_and_predicts_from_another_directory(tmp_path, monkeypatch, capsys):
    """README: a run trained on ``data.path=my.csv`` in one directory is evaluated, predicted and exported from
    another (its config.yaml stored ``my.csv`` relative, so `zoo eval` there failed: my.csv: no such file)."""
    from zoo.cli import main

    lines = (repo_root() / "data" / "treefarms-binary" / "monk2.csv").read_text().splitlines()
    (tmp_path / "ud").mkdir()
    (tmp_path / "ud" / "my.csv").write_text("\n".join(lines[:80]) + "\n")
    monkeypatch.chdir(tmp_path / "ud")
    assert (
        main(
            [
                "train",
                "recipe=praxis.yaml",
                "overlay=tiny/praxis.yaml",
                "data.path=my.csv",
                "data.label=class_1",
                "model.rid_bootstraps=0",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "ud" / "runs" / "praxis-my-tiny" / "version_0"
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["path"] == str(tmp_path / "ud" / "my.csv")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["metrics"]["train/best_tree_accuracy"] > 0.5
    assert main(["predict", str(run), "ud/my.csv"]) == 0, capsys.readouterr().err
    assert main(["export", str(run), "--formats", "package", "--out", str(tmp_path / "pkg")]) == 0
    assert main(["eval", str(tmp_path / "pkg" / "package")]) == 0, capsys.readouterr().err


def test_run_trained_in_the_project_root_evaluates_from_another_directory(tmp_path, monkeypatch, capsys):
    """Shipped paths stay project-relative in config.yaml; loading the run anchors them to the project."""
    from zoo.cli import main

    monkeypatch.chdir(repo_root())
    assert (
        main(
            [
                "train",
                "recipe=praxis.yaml",
                "overlay=tiny/praxis.yaml",
                "data.path=data/treefarms-binary/monk2.csv",
                "data.label=class_1",
                "model.rid_bootstraps=0",
                "export.formats=[]",
                f"out_dir={tmp_path / 'runs'}",
            ]
        )
        == 0
    )
    run = tmp_path / "runs" / "praxis-tiny" / "version_0"
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["path"] == "data/treefarms-binary/monk2.csv"
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0, capsys.readouterr().err
