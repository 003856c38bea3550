"""The ablation's rank correlation (hand values and scipy) and its configurations compose as recipes."""

import torch
from scipy.stats import spearmanr

from zoo.cli import compose_and_validate
from zoo.methods.st_tgexplainer.ablation import CONFIGS, rank_correlation


def test_rank_correlation_by_hand_and_against_scipy():
    a = torch.tensor([[1.0, 2, 3, 4, 0], [4, 3, 2, 1, 9]])
    b = torch.tensor([[10.0, 20, 30, 40, -5], [1, 2, 3, 4, 5]])
    valid = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]]).bool()  # the last column is padding
    assert rank_correlation(a, b, valid).tolist() == [1.0, -1.0]
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 9, generator=g), torch.randn(4, 9, generator=g)
    valid = torch.ones(4, 9, dtype=torch.bool)
    valid[0, :3] = False
    valid[3, 2:] = False  # 2 valid entries: dropped
    ours = rank_correlation(a, b, valid)
    ref = [spearmanr(a[i][valid[i]], b[i][valid[i]]).statistic for i in range(3)]
    assert ours.shape == (3,) and torch.allclose(ours, torch.tensor(ref, dtype=torch.float64))


def test_every_ablation_configuration_composes():
    for overrides in CONFIGS.values():
        cfg = compose_and_validate(["recipe=st-tgexplainer-bitcoin-otc.yaml", *overrides])
        assert cfg["method"] == "st-tgexplainer"


def test_training_to_convergence_in_resumed_calls_equals_one_call(tmp_path):
    """``fit_until_converged`` one epoch per call (resuming from last.ckpt) stops where one uninterrupted call stops,
    with the same best epoch, validation AP and weights."""
    from zoo.methods.st_tgexplainer.fitting import fit_until_converged

    cfg = compose_and_validate(
        [
            "recipe=st-tgexplainer.yaml",
            "overlay=tiny/st-tgexplainer.yaml",
            "trainer.max_epochs=4",
            "trainer.max_steps=-1",
        ]
    )
    whole = fit_until_converged(cfg, 0, tmp_path / "whole", patience=1, epochs_per_call=10)
    calls, parts = 0, None
    while parts is None:
        calls += 1
        parts = fit_until_converged(cfg, 0, tmp_path / "parts", patience=1, epochs_per_call=1)
    assert calls == parts[3]["epochs"] >= 2 and parts[3]["epochs"] == whole[3]["epochs"] <= 4
    for key in ("early_stopped", "best_epoch", "best_val_ap"):
        assert parts[3][key] == whole[3][key], key
    a, b = whole[0].state_dict(), parts[0].state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
