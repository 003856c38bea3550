"""The temporal cross-attention adapter: identity at gate 0, attention only along time per patch position."""

import torch

from zoo.methods.watchlog.adapter import TemporalCrossAttention
from zoo.methods.watchlog.encoders import FrameEncoder


def test_gate_zero_is_identity():
    torch.manual_seed(0)
    ad = TemporalCrossAttention(16, heads=2, max_frames=8)
    z = torch.randn(2, 5, 7, 16)
    assert torch.equal(ad(z), z)


def test_gate_zero_leaves_the_spatial_encoder_output_unchanged():
    torch.manual_seed(0)
    with_ad = FrameEncoder((16, 32), (8, 8), dim=16, depth=2, heads=2, adapter="pixel")
    no_ad = FrameEncoder((16, 32), (8, 8), dim=16, depth=2, heads=2, adapter="none")
    missing, unexpected = no_ad.load_state_dict(with_ad.state_dict(), strict=False)
    assert not missing and all(k.startswith("adapters.") for k in unexpected)
    frames = torch.rand(2, 4, 16, 32)
    torch.testing.assert_close(with_ad(frames), no_ad(frames), rtol=0, atol=0)
    # and each frame is then encoded on its own: changing frame 0 leaves frame 1 unchanged
    f2 = frames.clone()
    f2[:, 0] = torch.rand(2, 16, 32)
    assert torch.equal(with_ad(f2)[:, 1:], with_ad(frames)[:, 1:])


def test_attention_is_over_time_for_a_fixed_position():
    torch.manual_seed(0)
    ad = TemporalCrossAttention(16, heads=2, max_frames=8)
    with torch.no_grad():
        ad.gate.fill_(1.0)
    z = torch.randn(1, 6, 5, 16)
    z2 = z.clone()
    z2[0, 2, 3] += 1.0  # perturb frame 2 at position 3
    d = (ad(z2) - ad(z)).abs().sum(-1)[0]  # (T, N)
    assert torch.all(d[:, [0, 1, 2, 4]] == 0)  # other positions: untouched at every frame
    assert torch.all(d[[0, 1, 3, 4, 5], 3] > 0)  # same position: every other frame changes


def test_attention_weights_rows_sum_to_one_and_skip_padding():
    torch.manual_seed(0)
    ad = TemporalCrossAttention(8, heads=2, max_frames=8)
    z = torch.randn(2, 4, 3, 8)
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    _, attn = ad.attend(z, mask)
    assert attn.shape == (2, 3, 2, 4, 4)
    torch.testing.assert_close(attn.sum(-1), torch.ones(2, 3, 2, 4))
    assert torch.all(attn[0, :, :, :3, 3] == 0)  # real frames never attend to padding


def test_identical_frames_give_uniform_attention():
    ad = TemporalCrossAttention(8, heads=1, max_frames=8)
    with torch.no_grad():
        ad.time_pos.zero_()
    z = torch.randn(1, 1, 2, 8).expand(1, 5, 2, 8)
    _, attn = ad.attend(z)
    torch.testing.assert_close(attn, torch.full_like(attn, 0.2))


def test_pooled_mode_adds_one_update_to_every_position():
    torch.manual_seed(0)
    ad = TemporalCrossAttention(8, heads=2, max_frames=8, mode="pooled")
    with torch.no_grad():
        ad.gate.fill_(1.0)
    z = torch.randn(2, 4, 3, 8)
    delta = ad(z) - z
    torch.testing.assert_close(delta[:, :, 0], delta[:, :, 2])
    assert ad.attend(z)[1].shape == (2, 1, 2, 4, 4)


def test_causal_mask_blocks_the_future():
    ad = TemporalCrossAttention(8, heads=2, max_frames=8, causal=True)
    _, attn = ad.attend(torch.randn(1, 4, 2, 8))
    assert torch.all(attn.triu(1) == 0)


def test_fused_forward_matches_the_explicit_attention():
    torch.manual_seed(0)
    for mode in ("pixel", "pooled"):
        ad = TemporalCrossAttention(8, heads=2, max_frames=8, mode=mode)
        with torch.no_grad():
            ad.gate.fill_(0.7)
        z = torch.randn(2, 4, 3, 8)
        for mask in (None, torch.tensor([[True, True, True, False], [True, True, True, True]])):
            update, _ = ad.attend(z, mask)
            torch.testing.assert_close(ad(z, mask), z + torch.tanh(ad.gate) * update)
