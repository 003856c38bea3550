"""README promises that hold from any directory (#14 item 7): shipped data paths in recipes resolve against the
project, the user's override paths against the current directory."""
import os
import subprocess
import sys

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
    out = subprocess.run([sys.executable, "-m", "zoo.cli", "train", "recipe=praxis.yaml", "overlay=tiny/praxis.yaml",
                          f"out_dir={tmp_path / 'runs'}", "export.formats=[]"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "runs" / "praxis" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_predict_inputs_naming_shipped_examples_resolve_to_the_project(tmp_path, monkeypatch):
    from zoo.cli import _shipped_or_given

    monkeypatch.chdir(tmp_path)
    example = "data/mortality-distributions/desi_example_row.csv"  # a card's `zoo predict` example
    assert _shipped_or_given(example) == str(repo_root() / example)
    assert _shipped_or_given("my.csv") == "my.csv" and _shipped_or_given("How do I bake bread?") == "How do I bake bread?"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "desi_example_row.csv").write_text("x\n")  # a user's own data/ folder wins
    assert _shipped_or_given("data/desi_example_row.csv") == "data/desi_example_row.csv"


def test_method_readers_of_shipped_files_work_from_another_directory(tmp_path, monkeypatch):
    from zoo.data.preference import DEFAULT_PAIRS, DEFAULT_SPLIT
    from zoo.methods.pooled_reps.datamodule import ALPACA, _alpaca, _hh_eval

    monkeypatch.chdir(tmp_path)
    assert len(_alpaca(ALPACA, range(3), "alpaca-heldout")) == 3
    assert _hh_eval(DEFAULT_PAIRS, DEFAULT_SPLIT)
