"""The saliency-bias tables and card say "our metric" (the paper was never found), and the paper recipe's VGGs
train (BatchNorm, which the card shows BN-less VGGs need)."""

import json

from torch import nn

from zoo.core.data import repo_root
from zoo.core.recipe import load_recipe
from zoo.methods.saliency_bias.experiments import OUR_METRIC
from zoo.models.vision import build_vision_model


def test_every_table_and_benchmark_is_labelled_our_metric():
    files = sorted((repo_root() / "results" / "saliency-bias").glob("*.json"))
    assert files
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["notes"].startswith(OUR_METRIC), f
        assert "reproduc" not in json.dumps(doc.get("paper", "")).lower(), f


def test_card_never_says_reproduced():
    card = (repo_root() / "zoo" / "methods" / "saliency_bias" / "README.md").read_text()
    assert "**Reproduced" not in card and "our metric" in card
    verdict = next(line for line in card.splitlines() if line.startswith("Verdict:"))
    assert "our metric" in verdict and " reproduces;" not in verdict


def test_paper_recipe_vggs_have_batchnorm():
    cfg = load_recipe("paper/saliency-bias.yaml")
    vggs = [m for m in cfg["model"]["family"] if m["arch"] == "vgg"]
    assert len(vggs) == 4
    for m in vggs:
        spec = {k: v for k, v in m.items() if k not in ("name", "arch")}
        net = build_vision_model("vgg", 3, 100, 224, **spec)
        assert sum(isinstance(x, nn.BatchNorm2d) for x in net.modules()) == 13, m["name"]
