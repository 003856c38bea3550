"""The top-K SAE equals HypotheSAEs' SparseAutoencoder on the same parameters; weighted normalised MSE by hand."""

import pytest
import torch

from zoo.methods.pulse.sae import TopKSAE, normalised_mse


def _pair():
    hyp = pytest.importorskip("hypothesaes.sae")
    torch.manual_seed(0)
    x = torch.randn(40, 12)
    ours = TopKSAE(12, 10, 3, dead_steps=1)
    ours.init_from_data(x, torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours.neuron_bias.normal_()
        ours.encoder.weight.add_(0.1 * torch.randn_like(ours.encoder.weight))
    ref = hyp.SparseAutoencoder(12, 10, 3, dead_neuron_threshold_steps=1, device="cpu")
    state = {k: v for k, v in ours.state_dict().items() if k != "steps_since_activation"}
    ref.load_state_dict(state | {"threshold": torch.tensor(0.0)})
    return x, ours, ref


def test_equal_to_hypothesaes_forward_and_loss_with_revival():
    x, ours, ref = _pair()
    for _ in range(3):  # after two steps some features are dead (threshold 1 step): the aux-K term is live
        recon_ref, info = ref(x)
        loss_ref = ref.compute_loss(x, recon_ref, info, 1 / 32, 0.0)
        loss, parts = ours.loss(x, track=True)
        recon, act, _ = ours(x)
        assert torch.allclose(recon, recon_ref, atol=1e-6) and torch.allclose(act, info["activations"], atol=1e-6)
        assert torch.allclose(loss, loss_ref, atol=1e-6)
        assert torch.equal(ours.steps_since_activation, ref.steps_since_activation)
    assert parts["dead_fraction"] > 0 and (act > 0).sum(1).max() <= 3


def test_initialisation_matches_hypothesaes_rules():
    x = torch.randn(30, 8)
    sae = TopKSAE(8, 6, 2)
    sae.init_from_data(x, torch.Generator().manual_seed(1))
    assert torch.allclose(sae.input_bias, x.median(0).values)
    assert torch.allclose(sae.decoder.weight.norm(dim=0), torch.ones(6), atol=1e-6)
    assert torch.equal(sae.encoder.weight, sae.decoder.weight.t())


def test_weighted_normalised_mse_by_hand():
    target = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    pred = torch.tensor([[1.0, 0.0], [2.0, 0.0]])
    w = torch.tensor([1.0, 3.0])
    # weighted mean (1.5, 0); numerator (1*1 + 3*0)/4; denominator (1*2.25 + 3*0.25)/4 = 3/4
    assert normalised_mse(pred, target, w).item() == pytest.approx(0.25 / 0.75)
    assert normalised_mse(pred, target).item() == pytest.approx(1.0 / 2.0)  # mean (1, 0): (1/4) / (2/4)
