"""Messages that say what is wrong (#14 item 8): a chat file without assistant turns names the line, a missing run
directory is not called an unknown zoo id, and a fast_dev_run leaves a run folder `zoo export` accepts."""

import pytest

from zoo.cli import main
from zoo.core.data import DataError
from zoo.data.chat import read_conversations


def test_chat_without_assistant_turn_names_line(tmp_path):
    f = tmp_path / "chats.jsonl"
    f.write_text(
        '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n'
        '{"messages": [{"role": "user", "content": "only a question"}]}\n'
    )
    with pytest.raises(DataError, match=rf"{f}:2: messages: no 'assistant' turn"):
        read_conversations(f)


def test_missing_run_dir_is_not_an_unknown_zoo_id(tmp_path, capsys):
    assert main(["export", str(tmp_path / "runs" / "nope" / "version_0"), "--formats", "package"]) == 2
    err = capsys.readouterr().err
    assert "no such run directory or package folder" in err and "unknown zoo id" not in err


def test_fast_dev_run_leaves_an_exportable_run(tmp_path):
    assert (
        main(
            [
                "train",
                "recipe=tests/platform/recipes/digits.yaml",
                f"out_dir={tmp_path}",
                "logger.kind=none",
                "+trainer.fast_dev_run=true",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "digits" / "version_0"
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert main(["export", str(run), "--formats", "package"]) == 0


def test_a_missing_overlay_is_called_an_overlay(capsys):
    assert main(["config", "recipe=zoo-lm.yaml", "overlay=tiny/nope.yaml"]) == 2
    assert "error: overlay 'tiny/nope.yaml' not found" in capsys.readouterr().err


def test_json_error_column_counts_within_a_truncated_line(tmp_path):
    f = tmp_path / "chats.jsonl"
    f.write_text('{"messages": [{"role": "user", "content": "hi"}\n')  # the closing bracket and brace are missing
    with pytest.raises(DataError, match=rf"{f}:1: invalid JSON \(Expecting ',' delimiter at column 48\)"):
        read_conversations(f)


def test_zoo_eval_updates_a_runs_metrics_json_keeping_training_values(tmp_path, capsys):
    import json

    assert (
        main(
            [
                "train",
                "recipe=tests/platform/recipes/digits.yaml",
                f"out_dir={tmp_path}",
                "logger.kind=none",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "digits" / "version_0"
    trained = json.loads((run / "metrics.json").read_text())["metrics"]
    assert main(["eval", str(run)]) == 0 and main(["eval", str(run)]) == 0
    measured = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")["metrics"]
    doc = json.loads((run / "metrics.json").read_text())
    assert doc["metrics"] == {**trained, **measured} and set(trained) - set(measured)
    assert doc["source"].startswith("zoo eval (") and doc["source"].endswith(doc["training_source"])
    assert doc["training_source"].startswith("end of training")


@pytest.mark.parametrize(
    "argv", [["train.py", "--help"], ["train.py", "recipe=shapo.yaml", "-h"], ["-m", "zoo.cli", "config", "--help"]]
)
def test_help_prints_usage_and_exits_0(argv):
    import subprocess
    import sys

    from zoo.core.data import repo_root

    out = subprocess.run(
        [sys.executable, *argv], cwd=repo_root(), capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and out.stdout.startswith("usage: zoo train recipe=NAME"), out.stdout + out.stderr
    assert "error" not in out.stderr and "unexpected option" not in out.stdout
