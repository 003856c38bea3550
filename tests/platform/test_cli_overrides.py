"""One override grammar everywhere: zoo eval / export / predict take train.py's k=v tokens on the saved recipe, checked
like a recipe's keys; zoo predict --json writes JSON."""

import json

import pytest

from zoo.cli import main, split_overrides

RECIPE = "tests/platform/recipes/digits.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert (
        main(
            [
                "train",
                f"recipe={RECIPE}",
                f"out_dir={out}",
                "trainer.max_steps=3",
                "logger.kind=none",
                "export.formats=[]",
            ]
        )
        == 0
    )
    return out / "digits" / "version_0"


def test_split_overrides_keeps_method_inputs():
    assert split_overrides(["data.path=a.csv", "+model.x=1", "~data.val_path", "seed=2", "age=60", "hello"]) == (
        ["data.path=a.csv", "+model.x=1", "~data.val_path", "seed=2"],
        ["age=60", "hello"],
    )


def test_eval_takes_data_overrides(run, tmp_path, capsys):
    assert main(["eval", str(run), "--which", "last", "--out", str(tmp_path / "a.json")]) == 0
    assert main(["eval", str(run), "+data.limit=100", "--which", "last", "--out", str(tmp_path / "b.json")]) == 0
    full = json.loads((tmp_path / "a.json").read_text())["metrics"]
    small = json.loads((tmp_path / "b.json").read_text())["metrics"]
    assert full["val/acc"] != small["val/acc"]  # 20 held-out images instead of 360: another number


@pytest.mark.parametrize(
    "token,want",
    [
        ("data.batchsize=3", "data.batchsize: no such key"),
        ("+data.batchsize=3", "data.batchsize: DigitsDataModule takes no argument"),
        ("data.batch_size=big", "data.batch_size: expected int"),
    ],
)
def test_eval_override_errors_name_the_key(run, token, want, capsys):
    assert main(["eval", str(run), token, "--which", "last"]) == 2
    assert want in capsys.readouterr().err


def test_predict_json(run, capsys):
    pixels = ",".join(["0.5"] * 64)
    assert main(["predict", str(run), pixels, "--which", "last", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["method"] == "digits-mlp" and doc["inputs"] == [pixels] and doc["prediction"].strip().isdigit()


def test_export_takes_overrides(run, tmp_path, capsys):
    assert (
        main(
            [
                "export",
                str(run),
                "model.p_drop=0.0",
                "--which",
                "last",
                "--formats",
                "package",
                "--out",
                str(tmp_path / "exp"),
            ]
        )
        == 0
    )
    assert (tmp_path / "exp" / "package" / "model.safetensors").is_file()
