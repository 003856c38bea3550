"""Corner-shift canvases: boxes, pasted pixels, backgrounds, random-input controls; the shared image readers."""

import pytest
import torch

from zoo.core.data import DataError
from zoo.data.images import read_images
from zoo.methods.saliency_bias.canvas import POSITIONS, CornerShiftTrainSet, box_for, corner_shift_set, random_input_set


def test_boxes_by_hand():
    assert box_for("top_left", (4, 4), (8, 8)) == (0, 0, 4, 4)
    assert box_for("top_right", (4, 4), (8, 8)) == (0, 4, 4, 8)
    assert box_for("bottom_left", (4, 4), (8, 8)) == (4, 0, 8, 4)
    assert box_for("bottom_right", (4, 4), (8, 8)) == (4, 4, 8, 8)
    assert box_for("centre", (4, 4), (8, 8)) == (2, 2, 6, 6)
    with pytest.raises(ValueError, match="unknown position"):
        box_for("middle", (4, 4), (8, 8))


@pytest.mark.parametrize("kind", ["mean", "noise", "blur"])
def test_corner_shift_set_places_objects(kind):
    g = torch.Generator().manual_seed(0)
    objects, labels = torch.randn(3, 2, 4, 4, generator=g), torch.tensor([5, 6, 7])
    s = corner_shift_set(objects, labels, kind=kind, seed=1)
    assert s.x.shape == (15, 2, 8, 8) and len(s) == 15
    assert s.y.tolist() == [5] * 5 + [6] * 5 + [7] * 5
    assert s.position.tolist() == list(range(5)) * 3
    for i in range(15):
        y0, x0, y1, x1 = s.boxes[i].tolist()
        assert torch.equal(s.x[i, :, y0:y1, x0:x1], objects[s.source[i]])
        outside = s.x[i].clone()
        outside[:, y0:y1, x0:x1] = 0
        assert (outside.abs().sum() == 0) == (kind == "mean")
    r = random_input_set(s)
    assert r.random_input and torch.equal(r.boxes, s.boxes) and not torch.equal(r.x, s.x)


def test_blur_background_is_smooth_and_not_the_object():
    objects = torch.zeros(2, 1, 8, 8)
    objects[1] = 1.0
    s = corner_shift_set(objects, torch.tensor([0, 1]), kind="blur", positions=("top_left",))
    assert s.x[0, 0, 12, 12] > 0.9  # object 0's background is image 1 (all ones), never itself
    assert s.x[1, 0, 12, 12].abs() < 0.1


def test_train_set_random_positions():
    torch.manual_seed(0)
    ds = CornerShiftTrainSet(torch.ones(4, 1, 4, 4), torch.arange(4), kind="mean")
    seen = set()
    for _ in range(40):
        x, y = ds[1]
        assert x.shape == (1, 8, 8) and int(y) == 1 and x.sum() == 16
        seen.add(tuple(x[0].nonzero().min(0).values.tolist()))
    assert len(seen) == len(POSITIONS)


def test_readers_shapes_and_errors(tmp_path):
    train, test = read_images("digits")
    assert train.x.shape == (1500, 1, 8, 8) and test.x.shape[1:] == (1, 8, 8) and float(train.x.max()) <= 1.0
    train, test = read_images("cifar10")
    assert train.x.shape == (2000, 3, 32, 32) and test.x.shape == (200, 3, 32, 32) and train.classes[0] == "airplane"
    train, test = read_images("mnist")
    assert train.x.shape == (2500, 1, 28, 28) and len(test) == 500
    with pytest.raises(DataError, match="unknown dataset"):
        read_images("imagenet")
    bad = tmp_path / "broken.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match="broken.npz"):
        read_images("cifar10", str(bad))
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "a.png").write_bytes(b"not an image")
    with pytest.raises(DataError, match="a.png"):
        read_images("folder", str(tmp_path))


def test_datamodule_on_a_user_folder(tmp_path):
    import numpy as np
    from PIL import Image

    from zoo.methods.saliency_bias.datamodule import CornerShiftDataModule

    rng = np.random.default_rng(0)
    for name in ("cats", "dogs"):
        (tmp_path / name).mkdir()
        for i in range(5):
            Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(tmp_path / name / f"{i}.png")
    dm = CornerShiftDataModule(dataset="folder", path=str(tmp_path), size=8, background="noise", n_eval_objects=2)
    dm.setup("fit")
    assert dm.classes == ["cats", "dogs"] and dm.img_size == 16 and dm.in_channels == 3
    assert dm.eval_set.x.shape == (10, 3, 16, 16) and dm.random_set.random_input
    assert dm.eval_set.y[::5].tolist() == [0, 1]  # round-robin over classes, though the split is class-sorted
    x, _ = next(iter(dm.train_dataloader()))
    assert x.shape[1:] == (3, 16, 16)
    with pytest.raises(DataError, match="background"):
        CornerShiftDataModule(background="checkerboard")
