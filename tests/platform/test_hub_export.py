"""Zoo weights: release, verified load, tampering refused, pickles never executed, init_from adaptation, export."""

import logging
import os
import pickle
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from zoo.cli import main
from zoo.core import hub
from zoo.core.export import ExportError, export_module

RECIPE = "tests/platform/recipes/digits.yaml"


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    assert (
        main(["train", f"recipe={RECIPE}", f"out_dir={out}", "trainer.limit_train_batches=4", "logger.kind=none"]) == 0
    )
    return out / "digits" / "version_0"


def test_release_then_load_verified(trained_run, zoo_home):
    assert main(["release", str(trained_run), "--id", "digits-mlp.test"]) == 0
    assert main(["release", str(trained_run), "--id", "digits-mlp.test"]) == 2  # an existing id needs --force
    assert main(["release", str(trained_run), "--id", "digits-mlp.test", "--force"]) == 0
    entry = hub.read_manifest()["digits-mlp.test"]
    assert set(entry["files"]) >= {"model.safetensors", "config.yaml", "README.md"}
    assert entry["license"].startswith("CC-BY-4.0") and entry["method"] == "digits-mlp"
    assert zoo.list_pretrained() == ["digits-mlp.test"]
    model = zoo.load("digits-mlp.test")
    ref, _ = __import__("zoo.core.loading", fromlist=["load_module"]).load_module(str(trained_run))
    x = torch.rand(3, 64)
    assert torch.equal(model(x), ref(x))
    card = (zoo_home / "digits-mlp.test" / "README.md").read_text()
    assert "license: CC-BY-4.0" in card and "zoo.load('digits-mlp.test')" in card


def test_tampered_weights_are_refused(trained_run, zoo_home):
    main(["release", str(trained_run), "--id", "digits-mlp.tamper"])
    f = zoo_home / "digits-mlp.tamper" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(hub.HubError, match="sha256 mismatch"):
        zoo.load("digits-mlp.tamper")


def test_truncated_weights_are_refused(trained_run, zoo_home):
    main(["release", str(trained_run), "--id", "digits-mlp.trunc"])
    f = zoo_home / "digits-mlp.trunc" / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-8])
    with pytest.raises(hub.HubError, match="bytes, manifest says"):
        zoo.load("digits-mlp.trunc")


class _Payload:
    def __reduce__(self):
        return (Path.touch, (Path(os.environ["ZOO_PAYLOAD_MARK"]),))


def test_pickle_payload_is_never_executed(tmp_path, monkeypatch):
    mark = tmp_path / "pwned"
    monkeypatch.setenv("ZOO_PAYLOAD_MARK", str(mark))
    evil = tmp_path / "evil.ckpt"
    with open(evil, "wb") as f:
        pickle.dump({"state_dict": {}, "x": _Payload()}, f)
    with pytest.raises(hub.HubError, match="weights_only"):
        hub.load_weights(str(evil))
    for suffix in (".bin", ".pt", ".pth"):
        p = tmp_path / f"evil{suffix}"
        p.write_bytes(evil.read_bytes())
        with pytest.raises(hub.HubError, match="pickled weights are not loaded"):
            hub.load_weights(str(p))
    assert not mark.exists()


def test_init_from_adapts_declared_head_only(trained_run, tmp_path, caplog):
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    caplog.set_level(logging.INFO, logger="zoo")
    assert (
        main(
            [
                "train",
                f"recipe={RECIPE}",
                f"out_dir={tmp_path}",
                f"init_from={ckpt}",
                "model.num_classes=5",
                "data.num_classes=5",
                "trainer.max_steps=1",
                "logger.kind=none",
                "export.formats=[]",
            ]
        )
        == 0
    )
    assert "re-initialised head keys ['head.bias', 'head.weight']" in caplog.text
    # re-initialising the declared head is what init_from to another task does: said, but not as a warning
    assert all(r.levelno == logging.INFO for r in caplog.records if "re-initialised head keys" in r.getMessage())
    module = zoo.create("digits-mlp", hidden=16)
    state = hub.read_ckpt(ckpt)["state_dict"]
    with pytest.raises(hub.HubError) as e:
        hub.adapt_and_load(module, state)
    table = str(e.value)
    assert "body.0.weight" in table and "(32, 64)" in table and "(16, 64)" in table


def test_export_round_trips(trained_run, tmp_path):
    module, cfg = __import__("zoo.core.loading", fromlist=["load_module"]).load_module(str(trained_run))
    written = export_module(module, cfg, ["package", "onnx", "torch_export"], tmp_path)
    _, state = hub.load_package(written["package"])
    assert all(torch.equal(state[k], v) for k, v in module.state_dict().items())
    package = Path(written["package"])  # the weights as readable as the rest (safetensors alone writes 0600)
    assert (package / "model.safetensors").stat().st_mode == (package / "config.yaml").stat().st_mode
    assert Path(written["onnx"]).is_file() and Path(written["torch_export"]).is_file()
    with pytest.raises(ExportError, match="cannot export 'hf'; it supports package, onnx, torch_export"):
        export_module(module, cfg, ["hf"], tmp_path)


def test_export_cli_and_eval(trained_run, tmp_path, capsys):
    assert main(["export", str(trained_run), "--formats", "torch_export", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "model.pt2").is_file()
    assert main(["eval", str(trained_run), "--out", str(tmp_path / "m.json")]) == 0
    metrics = yaml.safe_load((tmp_path / "m.json").read_text())["metrics"]
    assert 0.0 <= metrics["val/acc"] <= 1.0
    assert main(["predict", str(trained_run), ",".join(["0.5"] * 64)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].isdigit()


def test_export_without_its_extra_names_the_install_command(trained_run, tmp_path, capsys, uninstall):
    """onnx needs the export extra: without it, one line with the command, exit 2 and nothing written (torch_export
    needs only torch and still works)."""
    uninstall("onnxruntime")
    out = tmp_path / "out"
    assert main(["export", str(trained_run), "--formats", "package,onnx", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        'error: onnx export needs: pip install -e ".[export]" (missing onnxruntime)'
    ]
    assert not out.exists()
    # checked before anything is loaded: even a run that does not exist gets the install line
    assert main(["export", str(tmp_path / "no-run"), "--formats", "onnx"]) == 2
    assert "onnx export needs" in capsys.readouterr().err
    assert main(["export", str(trained_run), "--formats", "torch_export", "--out", str(out)]) == 0
    assert (out / "model.pt2").is_file()


def test_export_names_the_methods_formats_before_any_extra(tmp_path, capsys, uninstall):
    """praxis exports only ``package``: ``--formats onnx`` says so (not "install .[export]"), for a run directory and a
    zoo id alike, before anything is loaded (the run below holds no weights at all)."""
    uninstall("onnxruntime")
    run = tmp_path / "praxis" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("method: praxis\n")
    assert main(["export", str(run), "--formats", "package,onnx"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: {run}: its method cannot export 'onnx'; it supports package", err
    assert main(["export", "desi.hmd-forecast", "--formats", "onnx"]) == 2
    assert "cannot export 'onnx'; it supports package" in capsys.readouterr().err
    assert not (run / "export").exists()


def test_export_refuses_a_format_before_importing_torch(tmp_path):
    """The refusal of a format the method lacks comes at once (#42): torch is never imported for it."""
    import subprocess
    import sys

    run = tmp_path / "praxis" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("method: praxis\n")
    probe = (
        "import sys; from zoo.cli import main; rc = main(sys.argv[1:]); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "export", str(run), "--formats", "onnx"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2 and "cannot export 'onnx'; it supports package" in out.stderr, out.stderr
    assert out.stdout.strip() == "torch not imported", out
