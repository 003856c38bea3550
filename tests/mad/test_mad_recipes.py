"""End to end: the deployed-model recipe and the detector recipe with their tiny overlays, and zoo predict."""

import json

from PIL import Image

from zoo.cli import main


def test_train_then_detect_then_predict(tmp_path):
    assert (
        main(
            [
                "train",
                "recipe=mad-badnets.yaml",
                "overlay=tiny/mad-badnets.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "mad-badnets-tiny" / "version_0"
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert 0 <= metrics["val/acc"] <= 1 and 0 <= metrics["val/asr"] <= 1
    # the detector from the trained run's weights (the tiny overlay's sizes match the CIFAR model's)
    ckpt = run / "checkpoints" / "last.ckpt"
    assert (
        main(
            [
                "train",
                "recipe=mad.yaml",
                "overlay=tiny/mad.yaml",
                f"out_dir={tmp_path}",
                f"init_from={ckpt}",
                "model.in_channels=3",
                "model.img_size=32",
                "data.dataset=cifar10-large",
                "data.n_trusted=100",
                "data.n_eval=40",
                "model.arch_kwargs={depth: 2, width: 4, pool_every: 1, n_pools: 1}",
            ]
        )
        == 0
    )
    det = json.loads((tmp_path / "mad-tiny" / "version_0" / "mad" / "detection.json").read_text())
    assert set(det["metrics"]) == {"mean-corr", "clc", "mean-ccc", "class-ccc", "strip", "mahalanobis", "spectral"}
    assert (
        det["split"]["n_trusted"] == 100 and (tmp_path / "mad-tiny" / "version_0" / "mad" / "anomalies.png").is_file()
    )
    # zoo predict scores images with the trusted set of the data the model was trained on
    imgs = []
    for i, colour in enumerate([(0, 0, 0), (255, 255, 255), (200, 30, 30)]):
        p = tmp_path / f"img{i}.png"
        Image.new("RGB", (40, 30), colour).save(p)
        imgs.append(str(p))
    assert main(["predict", str(run), *imgs, "--out-dir", str(tmp_path / "pred")]) == 0
    assert (tmp_path / "pred" / "anomalies.png").is_file()
