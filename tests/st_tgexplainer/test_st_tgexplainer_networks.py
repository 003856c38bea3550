"""Network pieces: frozen time encoding, token masks (2K per event), co-occurrence counts, weight injection."""

import math

import torch

from zoo.methods.st_tgexplainer.networks import (
    MixerBlock,
    STTGExplainerNet,
    TimeEncoder,
    cooccurrence_counts,
    gumbel_sigmoid,
)

K, B, N = 3, 4, 9


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    valid = torch.rand(B, K, generator=g) > 0.3
    valid[:, -1] = True
    nbr = torch.randint(1, N + 1, (B, K), generator=g) * valid
    return {
        "u": torch.randint(1, N + 1, (B,), generator=g),
        "v": torch.randint(1, N + 1, (B,), generator=g),
        "t": torch.full((B,), 100.0),
        "u_nbr": nbr,
        "u_nbr_t": torch.rand(B, K, generator=g) * 90 * valid,
        "u_valid": valid,
        "v_nbr": nbr.flip(0),
        "v_nbr_t": torch.rand(B, K, generator=g) * 90 * valid.flip(0),
        "v_valid": valid.flip(0),
    }


def test_time_encoding_values_and_frozen():
    enc = TimeEncoder(4)
    omega = [1.0, 10**-3, 10**-6, 10**-9]
    dt = torch.tensor([0.0, 2.5e3])
    want = [[math.cos(w * x) for w in omega] for x in dt.tolist()]
    assert torch.allclose(enc(dt), torch.tensor(want), atol=1e-6)
    assert list(enc.parameters()) == []
    net = STTGExplainerNet(N, K, hidden=8, time_dim=4)
    before = net.time_enc.omega.clone()
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    out = net(**inputs())
    (out["logit"].sum() + out["h_T"].sum()).backward()
    opt.step()
    assert torch.equal(net.time_enc.omega, before)
    assert all(p is not net.time_enc.omega for p in net.parameters())


def test_masks_have_one_entry_per_token():
    net = STTGExplainerNet(N, K, hidden=8, time_dim=4).eval()
    out = net(**inputs())
    for key in ("s", "rho", "mask_logit", "counts", "valid"):
        assert out[key].shape == (B, 2 * K), key
    assert out["logit"].shape == (B,) and out["h_S"].shape == (B, 8) and out["h_T"].shape == (B, 8)
    # each token gets its own score (not one shared per endpoint)
    assert out["s"][0].unique().numel() > 1


def test_cooccurrence_counts_by_hand():
    ids = torch.tensor([[5, 7, 5, 0, 7, 5]])
    valid = ids > 0
    assert cooccurrence_counts(ids, valid).tolist() == [[3.0, 2.0, 3.0, 0.0, 2.0, 3.0]]


def test_gumbel_sigmoid_eval_is_sigmoid_and_train_is_noisy():
    x = torch.linspace(-3, 3, 7)
    assert torch.equal(gumbel_sigmoid(x, False), torch.sigmoid(x))
    torch.manual_seed(0)
    y = gumbel_sigmoid(x.repeat(2000, 1), True)
    assert not torch.allclose(y[0], y[1])
    # the Binary Concrete with tau = 1 is a Bernoulli(sigmoid(x)) in expectation of its hard threshold
    assert torch.allclose((y > 0.5).float().mean(0), torch.sigmoid(x), atol=0.04)


def test_mixer_weight_injection():
    blk = MixerBlock(2 * K, 8).eval()
    x = torch.randn(B, 2 * K, 8)
    assert torch.allclose(blk(x, torch.ones(B, 2 * K)), blk(x))
    assert torch.equal(blk(x, torch.zeros(B, 2 * K)), torch.zeros(B, 2 * K, 8))
    w = torch.ones(B, 2 * K)
    w[:, 0] = 0
    assert torch.equal(blk(x, w)[:, 0], torch.zeros(B, 8))  # a zero-weight token is silenced


def test_keep_mask_equals_padding_the_token():
    net = STTGExplainerNet(N, K, hidden=8, time_dim=4).eval()
    inp = inputs(1)
    keep = torch.ones(B, 2 * K, dtype=torch.bool)
    keep[:, K - 1] = False  # drop u's most recent neighbour
    masked = net(**inp, keep=keep)
    inp2 = dict(inp, u_valid=inp["u_valid"].clone(), u_nbr=inp["u_nbr"].clone())
    inp2["u_valid"][:, K - 1] = False
    inp2["u_nbr"][:, K - 1] = 0
    padded = net(**inp2)
    assert torch.allclose(masked["logit"], padded["logit"], atol=1e-6)
    assert not masked["valid"][:, K - 1].any()


def test_graphmixer_variant_has_no_masks():
    net = STTGExplainerNet(N, K, hidden=8, time_dim=4, explainer=False).eval()
    out = net(**inputs())
    assert set(out) == {"logit", "valid"} and not hasattr(net, "discriminator")


def test_swapping_rho_leaves_the_prediction_unchanged_and_stability_is_oriented():
    net = STTGExplainerNet(N, K, hidden=8, time_dim=4).eval()
    inp = inputs(2)
    out = net(**inp)
    last = net.stability[-1]
    with torch.no_grad():  # negate the prior's logit: rho -> 1 - rho in eval mode
        last.weight.neg_()
        last.bias.neg_()
    swapped = net(**inp)
    assert torch.allclose(swapped["rho"], 1 - out["rho"], atol=1e-6)
    assert torch.allclose(swapped["logit"], out["logit"], atol=1e-5)  # z sums both passes
    assert torch.allclose(swapped["stability"], out["stability"], atol=1e-6)  # the oriented prior is the same
    with torch.no_grad():  # force the prior to grow with the count
        net.stability[0].weight.fill_(1.0)
        net.stability[0].bias.zero_()
        last.weight.fill_(1.0)
        last.bias.zero_()
    grown = net(**inp)
    assert net.rho_increases_with_count() and torch.equal(grown["stability"], grown["rho"])


def test_chunked_mixer_equals_one_pass_in_values_and_gradients():
    """``mix_chunk`` (speed only) cuts the batch into chunks; outputs and every gradient match the one-chunk pass, in
    training mode (Gumbel noise drawn from the same seed) as in evaluation."""
    results = []
    for chunk in (B, 3, 1):  # one pass; a ragged cut (3 + 1); one event per chunk
        torch.manual_seed(0)
        net = STTGExplainerNet(N, K, hidden=8, time_dim=4, dropout=0.0)
        net.mix_chunk = chunk
        torch.manual_seed(1)
        out = net.train()(**inputs())
        (out["logit"].sum() + out["h_S"].pow(2).sum() + out["h_T"].sum() + out["s"].sum()).backward()
        ev = net.eval()(**inputs(1))
        results.append((out, {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}, ev))
    (ref, ref_grad, ref_ev), others = results[0], results[1:]
    for out, grad, ev in others:
        for key in ("logit", "s", "rho", "h_S", "h_T"):
            assert torch.allclose(out[key], ref[key], atol=1e-6), key
            assert torch.allclose(ev[key], ref_ev[key], atol=1e-6), key
        assert grad.keys() == ref_grad.keys() and len(grad) > 10
        for name in grad:
            assert torch.allclose(grad[name], ref_grad[name], atol=1e-5), name
