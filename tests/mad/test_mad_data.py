"""The detector's split: sizes, disjoint and class-balanced parts, triggered copies, the OOD conversion, errors."""

import pytest
import torch

from zoo.core.data import DataError
from zoo.methods.mad.datamodule import BackdoorDataModule, balanced_order, convert_images


def test_split_sizes_and_balance():
    dm = BackdoorDataModule(
        dataset="mnist-10k",
        attack="badnets",
        rate=0.1,
        n_train=500,
        n_trusted=300,
        n_eval=700,
        ood_dataset="cifar10-large",
        n_ood=20,
        seed=3,
    )
    dm.setup()
    s = dm.split_summary()
    assert (s["n_model_train"], s["n_poisoned"], s["n_sampling"], s["n_trusted"], s["n_eval"]) == (
        500,
        50,
        1000,
        300,
        700,
    )
    assert s["n_calibration"] == 210 and s["n_ood"] == 20 and dm.ood.shape == (20, 1, 28, 28)
    assert torch.bincount(dm.trusted.y, minlength=10).tolist() == [30] * 10
    assert torch.bincount(dm.train_y[~torch.isin(torch.arange(500), dm.poisoned)], minlength=10).min() > 0
    assert dm.eval_triggered.shape == dm.eval.x.shape and not torch.equal(dm.eval_triggered, dm.eval.x)
    # trusted and evaluation images are different test images
    flat = torch.cat([dm.trusted.x, dm.eval.x]).flatten(1)
    assert len(torch.unique(flat, dim=0)) == 1000


def test_balanced_order_prefix_and_conversion():
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    order = balanced_order(y, 0)
    assert sorted(y[order[:3]].tolist()) == [0, 1, 2] and sorted(order.tolist()) == list(range(9))
    rgb = torch.zeros(1, 3, 32, 32)
    rgb[:, 1] = 1.0  # pure green -> luma 0.587
    grey = convert_images(rgb, 1, 28)
    assert grey.shape == (1, 1, 28, 28) and torch.allclose(grey, torch.full_like(grey, 0.587), atol=1e-5)


def test_bad_settings_fail_before_training(tmp_path):
    with pytest.raises(DataError, match="attack"):
        BackdoorDataModule(attack=None)
    with pytest.raises(ValueError, match="unknown attack"):
        BackdoorDataModule(attack="trojan")
    with pytest.raises(DataError, match="n_trusted"):
        BackdoorDataModule(dataset="mnist-10k", n_trusted=900, n_eval=700).setup()
    bad = tmp_path / "x.npz"
    bad.write_text("not an npz")
    with pytest.raises(DataError, match="x.npz"):
        BackdoorDataModule(dataset="mnist", path=str(bad)).setup()
