"""The shapo-cost-model: Bradley-Terry loss by hand; the cost is read at the last real token."""

import pytest
import torch

from zoo.core.registry import get_method
from zoo.methods.shapo_cost_model.module import bradley_terry_cost_loss


def test_bradley_terry_loss_by_hand():
    c_w, c_l = torch.tensor([0.0]), torch.tensor([1.0])
    # -log sigma(1 - 0) = 0.3132617; centring 0.5 * (0 + 1)^2 = 0.5
    assert bradley_terry_cost_loss(c_w, c_l).item() == pytest.approx(0.3132616875, abs=1e-7)
    assert bradley_terry_cost_loss(c_w, c_l, 0.5).item() == pytest.approx(0.8132616875, abs=1e-7)


def test_score_ignores_right_padding_and_maps_zoo_lm_keys():
    torch.manual_seed(0)
    cls = get_method("shapo-cost-model").module_cls
    m = cls(arch="zoo-lm-tiny").eval()
    torch.nn.init.normal_(m.head.weight)
    ids = torch.tensor([[1, 5, 9, 2, 0, 0], [1, 7, 7, 7, 7, 2]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        both = m.score(ids, mask)
        alone = m.score(ids[:1, :4], mask[:1, :4])
    assert torch.allclose(both[0], alone[0], atol=1e-5)
    # a zoo-lm package state (lm.model.*, lm.lm_head.*) maps onto backbone.* and keeps the head
    lm_state = {"lm." + k: v for k, v in m.backbone.state_dict().items()}
    lm_state = {k.replace("lm.", "lm.model.", 1): v for k, v in lm_state.items()}
    lm_state["lm.lm_head.weight"] = torch.zeros(1)
    mapped = m.remap_init_state(lm_state, "zoo-lm")
    assert set(mapped) == set(m.state_dict()) - {"head.weight", "head.bias"}  # the head is a head key: fresh
    from zoo.core import hub

    report = hub.adapt_and_load(m, lm_state, "zoo-lm")
    assert sorted(report["missing"]) == ["head.bias", "head.weight"] and not report["unexpected"]


@pytest.mark.slow  # a tiny training run and its evaluation: ~12 s under load 5
def test_seed_protocol_trains_selects_and_scores_each_seed_then_reuses_the_cache(tmp_path, monkeypatch):
    import json

    from zoo.core import training
    from zoo.methods.shapo_cost_model import experiments

    argv = [
        "--recipe",
        "shapo-cost-model.yaml",
        "--seeds",
        "3",
        "--work",
        str(tmp_path / "work"),
        "--results-dir",
        str(tmp_path),
        "--set",
        "overlay=tiny/shapo-cost-model.yaml",
        "data.max_eval_pairs=8",
        "export.formats=[]",
    ]
    experiments.main(argv)
    doc = json.loads((tmp_path / "shapo-cost-model" / "heldout-shapo-cost-model.json").read_text())
    assert [r["seed"] for r in doc["rows"]] == [3]
    for r in doc["rows"]:
        assert r["test_pairs"] == 8 and r["test_ci_lo"] <= r["test_accuracy"] <= r["test_ci_hi"]
        assert 0.0 <= r["val_accuracy"] <= 1.0
    assert doc["summary"][0]["test_accuracy"]["n"] == 1
    monkeypatch.setattr(training, "train", lambda *a, **k: pytest.fail("a finished seed was trained again"))
    experiments.main(argv)
