"""FAST's math on small cases with hand values: eq. 7, Alg. 1 dedup, the mixing buffer, the geometric median,
sae-lens' L1 and JumpReLU STE as configured by us, GSNR and the LR schedule."""

import math

import pytest
import torch

from zoo.methods.fast.metrics import eq7_mse, error_by_position, gsnr
from zoo.methods.fast.pipelines import mixing_buffer, ngram_dedup, pack_blocks
from zoo.methods.fast.sae import build_sae, coefficient_warmup, geometric_median, lr_factor


def test_eq7_mse_hand_example():
    # sequence 0 has tokens with summed squared errors 2 and 4, sequence 1 one token with 6; H = 2
    sq, seq = torch.tensor([2.0, 4.0, 6.0]), torch.tensor([0, 0, 1])
    assert eq7_mse(sq, seq, 2) == pytest.approx(((2 + 4) / 2 + 6 / 1) / 2 / 2)  # 2.25
    # MSE_st: only the selected tokens, averaged per sequence first
    assert eq7_mse(sq, seq, 2, torch.tensor([True, False, True])) == pytest.approx((2 / 1 + 6 / 1) / 2 / 2)
    # a sequence without a selected token leaves N
    assert eq7_mse(sq, seq, 2, torch.tensor([False, True, False])) == pytest.approx(4 / 2)
    assert math.isnan(eq7_mse(sq, seq, 2, torch.zeros(3, dtype=torch.bool)))
    # position 0 holds errors 2 and 6 (mean 4), position 1 holds 4; per dimension (H = 2); an empty bin is None
    assert error_by_position(sq, torch.tensor([0, 1, 0]), 2, [0, 1, 2, 9]) == [2.0, 2.0, None]


def test_dedup_drops_a_sample_sharing_one_20gram():
    words = [f"w{i}" for i in range(60)]
    a = " ".join(words[:25])
    shares_one = " ".join(["x", "y"] + words[3:23] + ["z"])  # w3..w22: one 20-gram of a
    shares_19 = " ".join(["p"] + words[3:22] + ["q", "r"])  # only 19 consecutive words of a
    fresh = " ".join(words[30:55])
    assert ngram_dedup([a, shares_one, shares_19, fresh, a]) == [0, 2, 3]
    assert ngram_dedup(["short text", "short text", "other"]) == [0, 2]  # < 20 words: the whole text is one gram


def test_mixing_buffer_emits_each_activation_once_and_only_after_the_fill():
    consumed = []

    def stream():
        for start in range(0, 30, 3):
            consumed.append(start + 3)
            yield torch.arange(start, start + 3, dtype=torch.float32)[:, None]

    out = []
    for batch in mixing_buffer(stream(), capacity=8, batch_size=2, generator=torch.Generator().manual_seed(0)):
        if not out:
            assert consumed[-1] >= 8  # the first batch only after the buffer is full
        out.append(batch)
    flat = torch.cat(out).flatten()
    assert all(len(b) == 2 for b in out)
    assert sorted(flat.tolist()) == list(range(30))  # every activation exactly once per pass
    assert flat.tolist() != list(range(30))  # and shuffled
    with pytest.raises(ValueError, match="capacity"):
        next(mixing_buffer(stream(), capacity=3, batch_size=2))


def test_bt_blocks_cross_documents():
    blocks, owner = pack_blocks([[1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 9, 2]], block_size=5)
    assert blocks.tolist() == [[1, 5, 6, 2, 1], [7, 2, 1, 8, 9]]  # tail [9, 2] dropped
    assert owner.tolist() == [[0, 0, 0, 0, 1], [1, 1, 2, 2, 2]]


def test_geometric_median_of_three_collinear_points():
    points = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0]])
    assert torch.allclose(geometric_median(points), torch.tensor([1.0, 0.0]), atol=1e-4)  # the middle point
    square = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0]])
    assert torch.allclose(geometric_median(square), torch.tensor([1.0, 1.0]), atol=1e-5)


def _set(sae, **params):
    with torch.no_grad():
        for name, value in params.items():
            getattr(sae, name).copy_(torch.as_tensor(value, dtype=torch.float32))


def test_standard_sae_l1_and_mse_against_hand_values():
    from sae_lens.saes.sae import TrainStepInput

    sae = build_sae("standard", d_in=2, d_sae=2, l1_coefficient=5.0)
    _set(sae, W_enc=torch.eye(2), b_enc=[0.0, 0.0], W_dec=2 * torch.eye(2), b_dec=[0.0, 0.0])
    out = sae.training_forward_pass(TrainStepInput(torch.tensor([[1.0, -3.0]]), {"l1": 5.0}, None, 0, False))
    # f = ReLU(x) = [1, 0]; x_hat = 2 f = [2, 0]; MSE = 1 + 9; L1 = 5 * (1 * ||d_0|| = 2)
    assert out.losses["mse_loss"].item() == pytest.approx(10.0)
    assert out.losses["l1_loss"].item() == pytest.approx(10.0)
    assert out.loss.item() == pytest.approx(20.0)


def test_jumprelu_ste_gradient_against_hand_values():
    from sae_lens.saes.sae import TrainStepInput

    sae = build_sae(
        "jumprelu", d_in=2, d_sae=2, l0_coefficient=0.01, jumprelu_bandwidth=0.001, jumprelu_init_threshold=0.001
    )
    assert torch.allclose(sae.threshold, torch.full((2,), 0.001))
    _set(sae, W_enc=torch.eye(2), b_enc=[0.0, 0.0], W_dec=torch.eye(2), b_dec=[0.0, 0.0])
    x = torch.tensor([[0.0012, 0.005]])  # z - theta = 0.0002 (inside the rectangle of width 0.001) and 0.004 (outside)
    out = sae.training_forward_pass(TrainStepInput(x, {"l0": 0.01}, None, 0, False))
    assert out.losses["l0_loss"].item() == pytest.approx(0.02)  # both features fire: 0.01 * 2
    out.losses["l0_loss"].backward()
    # d/dtheta of lambda * H(z - theta) via the STE: -lambda / bandwidth * rect((z - theta) / bandwidth)
    assert sae.threshold.grad.tolist() == pytest.approx([-10.0, 0.0])
    sae.threshold.grad = None
    out = sae.training_forward_pass(TrainStepInput(x, {"l0": 0.01}, None, 0, False))
    out.losses["mse_loss"].backward()
    # MSE = 0 here (x_hat = x); JumpReLU's threshold gradient is -(theta / bandwidth) rect(.) * dL/df = 0
    assert sae.threshold.grad.tolist() == pytest.approx([0.0, 0.0])


def test_gsnr_hand_values():
    grads = torch.tensor([[1.0, 1.0, 0.0, 2.0], [3.0, -1.0, 4.0, 2.0]])
    # per parameter mean^2 / var(ddof 1): 4/2 = 2, 0/2 = 0, 4/8 = 0.5, constant (var 0: left out) -> median 0.5
    assert gsnr(grads) == pytest.approx(0.5)


def test_lr_schedule_and_sparsity_warmup():
    total = 100
    assert lr_factor(0, total, 0.05, 0.2, 0.1) == pytest.approx(1 / 5)
    assert lr_factor(50, total, 0.05, 0.2, 0.1) == 1.0
    assert lr_factor(90, total, 0.05, 0.2, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(100, total, 0.05, 0.2, 0.1) == pytest.approx(0.1)
    assert coefficient_warmup(5.0, 0, 4) == pytest.approx(1.25) and coefficient_warmup(5.0, 10, 4) == 5.0


def test_activation_stream_replays_passes_for_the_token_budget():
    from zoo.methods.fast.datamodule import ActivationStream

    pieces = [torch.arange(i * 10, i * 10 + 10, dtype=torch.float32)[:, None] for i in range(4)]  # 40 activations
    stream = ActivationStream(pieces, training_tokens=100, capacity=8, batch_size=4, seed=0)
    batches = list(stream)
    assert len(stream) == 25 and len(batches) == 25
    seen = torch.cat(batches).flatten()
    counts = torch.bincount(seen.long(), minlength=40)
    # 2.5 passes through a buffer that runs on across pass boundaries: every activation emitted, at most 3 times
    assert counts.min() >= 1 and counts.max() <= 3 and int(counts.sum()) == 100
