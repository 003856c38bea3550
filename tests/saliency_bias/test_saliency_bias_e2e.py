"""End to end: the tiny recipe trains, writes the benchmark table and grids; predict writes a PNG and the CSI;
randomisation and saliency pieces on small models."""

import json

import pytest
import torch

from zoo.cli import main
from zoo.methods.saliency_bias.randomise import cascading_randomisation, parameter_layers
from zoo.methods.saliency_bias.saliency import METHODS, saliency_maps, supports
from zoo.models.vision import build_vision_model


def test_cascading_randomisation_top_down_and_full():
    torch.manual_seed(0)
    model = build_vision_model("vgg", 1, 3, 16, depth=3, width=4)
    torch.manual_seed(1)
    fresh = build_vision_model("vgg", 1, 3, 16, depth=3, width=4)
    layers = parameter_layers(model)
    assert layers == ["features.0", "features.2", "features.5", "head"]
    one = cascading_randomisation(model, fresh, 1)
    assert torch.equal(one.head.weight, fresh.head.weight)
    assert torch.equal(one.features[0].weight, model.features[0].weight)
    full = cascading_randomisation(model, fresh, 99)
    x = torch.randn(2, 1, 16, 16)
    assert torch.equal(full(x), fresh(x)) and torch.equal(cascading_randomisation(model, fresh, 0)(x), model(x))


def test_batch_norm_vgg_keeps_the_random_init_and_is_randomised_with_its_statistics():
    """BatchNorm draws no random numbers: a seeded VGG with it has the same weights and, in eval mode at init, the
    same outputs and path counts as without; full randomisation also resets the trained running statistics."""
    from zoo.methods.saliency_bias.path_count import path_count_map

    torch.manual_seed(0)
    plain = build_vision_model("vgg", 1, 3, 16, depth=3, width=4).eval()
    torch.manual_seed(0)
    bn = build_vision_model("vgg", 1, 3, 16, depth=3, width=4, batch_norm=True).eval()
    assert parameter_layers(bn) == [
        "features.0",
        "features.1",
        "features.3",
        "features.4",
        "features.7",
        "features.8",
        "head",
    ]
    x = torch.randn(2, 1, 16, 16)
    assert torch.allclose(bn(x), plain(x), rtol=1e-4, atol=1e-6)
    assert torch.equal(path_count_map(bn, (16, 16)), path_count_map(plain, (16, 16)))
    torch.manual_seed(1)
    fresh = build_vision_model("vgg", 1, 3, 16, depth=3, width=4, batch_norm=True).eval()
    bn.train()
    bn(3 + 2 * torch.randn(8, 1, 16, 16))  # moves the running statistics
    bn.eval()
    assert not torch.equal(bn.features[1].running_mean, fresh.features[1].running_mean)
    assert torch.equal(cascading_randomisation(bn, fresh, 99)(x), fresh(x))


@pytest.mark.parametrize("arch", ["vgg", "resnet", "vit", "mlp"])
def test_every_method_gives_a_pixel_map(arch):
    torch.manual_seed(0)
    model = build_vision_model(arch, 3, 4, 32)
    x, t = torch.randn(2, 3, 32, 32), torch.tensor([0, 3])
    for method in METHODS:
        if not supports(model, method):
            assert arch in ("vit", "mlp") and method == "grad_cam"
            continue
        s = saliency_maps(model, x, t, method, ig_steps=2, sg_samples=2)
        assert s.shape == (2, 32, 32) and (s >= 0).all()
        assert s.sum() > 0 or method == "grad_cam"  # a ReLU'd class activation map may be all zero


def test_tiny_recipe_writes_table_grids_and_predict(tmp_path):
    assert (
        main(
            [
                "train",
                "recipe=saliency-bias.yaml",
                "overlay=tiny/saliency-bias.yaml",
                f"out_dir={tmp_path}",
                "export.formats=[]",
            ]
        )
        == 0
    )
    run = tmp_path / "saliency-bias-tiny" / "version_0"
    out = run / "saliency_bias"
    rows = json.loads((out / "rows.json").read_text())
    assert {r["state"] for r in rows} == {
        "trained",
        "cascade_half",
        "random",
        "trained_random_input",
        "random_random_input",
    }
    assert {r["method"] for r in rows if r["model"] == "mlp"} == {"gradient"}  # no Grad-CAM without a conv layer
    assert (out / "grid_vgg-zeros-d2.png").stat().st_size > 1000 and "csi_centroid" in (out / "table.md").read_text()
    assert json.loads((out / "path_counts.json").read_text())[0]["model"] == "vgg-zeros-d2"
    from PIL import Image

    img = tmp_path / "seven.png"
    Image.fromarray((torch.rand(8, 8) * 255).byte().numpy()).save(img)
    assert main(["predict", str(run), str(img), "--out-dir", str(tmp_path / "pred")]) == 0
    assert (tmp_path / "pred" / "saliency_seven.png").is_file()
    assert main(["predict", str(run), str(tmp_path / "missing.png")]) != 0
