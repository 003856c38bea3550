"""Watermark and modulation math on small cases with known answers (issue #25 "Tests")."""

import math

import pytest
import torch
from scipy import stats

from zoo.methods.sembind.modulation import SemanticModulation
from zoo.methods.sembind.watermarks import (
    WIND,
    GaussianShading,
    RingID,
    TreeRing,
    calibrate,
    centred_fft,
    chacha20_bits,
    empirical_threshold,
)

SHAPE = (3, 16, 16)


@pytest.mark.parametrize("cls", [TreeRing, RingID])
def test_ring_key_is_hermitian_and_recovered_exactly(cls):
    scheme = cls(SHAPE, 3, seed=7)
    key = scheme.key
    flipped = torch.roll(torch.flip(key, (0, 1)), (1, 1), (0, 1))  # k -> -k on the centred grid of even side
    assert torch.allclose(key, flipped.conj()), "ring key is not Hermitian"
    z = torch.randn(4, *SHAPE)
    zw = scheme.inject(z)
    f = centred_fft(zw.double())
    for ch in scheme.channels:
        assert torch.allclose(f[:, ch][:, scheme.mask], key[scheme.mask].to(f.dtype).expand(4, -1), atol=1e-3)
    # outside the disc and in unkeyed channels the latent is untouched in frequency
    assert torch.allclose(f[:, :, ~scheme.mask], centred_fft(z.double())[:, :, ~scheme.mask], atol=1e-3)
    assert torch.all(scheme.score(zw) > -1e-3) and torch.all(scheme.score(z) < -1.0)


def test_chacha20_matches_the_rfc7539_test_vector():
    # RFC 7539 §2.4.2: key 00..1f, nonce 000000000000004a00000000, counter 1; cryptography takes counter||nonce
    key = bytes(range(32))
    nonce = (1).to_bytes(4, "little") + bytes.fromhex("000000000000004a00000000")
    bits = chacha20_bits(key, nonce, 32)
    first = bytes(int("".join(map(str, bits[i : i + 8].tolist())), 2) for i in range(0, 32, 8))
    assert first == bytes.fromhex("224f51f3")  # keystream for the plaintext 0x4c616469 -> ciphertext 0x6e2e359a


def test_gaussian_shading_message_recovered_exactly_and_latent_is_standard_normal():
    gs = GaussianShading(SHAPE, hw_copy=2, seed=3)
    z = gs.inject(torch.empty(64, *SHAPE), torch.Generator().manual_seed(0))
    assert torch.equal(gs.extract(z), gs.message.expand(64, -1, -1, -1))
    assert torch.all(gs.score(z) == 1.0)
    # N(0, 1) over the key's randomness: one latent for each of 16 keys (one key's fixed sign pattern has a share
    # of positive entries within ~1/sqrt(d) of 1/2, which a KS test over many latents of that key would see)
    z = torch.cat(
        [
            GaussianShading(SHAPE, 2, seed=s).inject(torch.empty(1, *SHAPE), torch.Generator().manual_seed(s))
            for s in range(16)
        ]
    )
    ks = stats.kstest(z.flatten().numpy(), "norm")
    assert ks.pvalue > 0.01, f"watermarked entries are not N(0, 1): {ks}"


def test_modulation_is_self_inverse_and_keeps_the_normal_law():
    mod = SemanticModulation(SHAPE, 64, r=0.5, seed=1)
    code = torch.randint(0, 2, (32, 64))
    z = torch.randn(32, *SHAPE)
    assert torch.equal(mod(mod(z, code), code), z)
    assert stats.kstest(mod(z, code).flatten().numpy(), "norm").pvalue > 0.01
    # the subset has r * d entries and each carries its tiled bit (every bit is tiled d / B = 12 times)
    assert int(mod.omega.sum()) == round(0.5 * 768)
    ones = torch.ones(1, 64, dtype=torch.long)
    assert torch.equal(mod.flips(ones)[0].flatten(), mod.omega)


@pytest.mark.parametrize("r", [0.25, 0.5, 1.0])
def test_orthogonal_codes_flip_r_over_two_of_signs_and_voted_accuracy_is_binomial(r):
    torch.manual_seed(0)
    mod = SemanticModulation(SHAPE, 64, r=r, seed=2)
    m = torch.randint(0, 2, (1, 64))
    other = m.clone()
    other[0, torch.randperm(64)[:32]] ^= 1  # Hamming distance B/2: orthogonal as ±1 codes
    wrong = (mod.flips(m) ^ mod.flips(other)).float().mean().item()
    assert abs(wrong - r / 2) < 0.03
    # Gaussian Shading demodulated with the wrong code: each of the k = 4 votes of a bit is wrong w.p. p = r/2 (the
    # permutation spreads the copies), so the voted bit is right w.p. P(Bin(k, 1-p) > k/2) + ties counted as 0
    gs = GaussianShading(SHAPE, hw_copy=2, seed=4)
    n_img = 400
    z = gs.inject(torch.empty(n_img, *SHAPE), torch.Generator().manual_seed(1))
    codes_a = torch.randint(0, 2, (n_img, 64))
    codes_b = codes_a.clone()
    for row in codes_b:
        row[torch.randperm(64)[:32]] ^= 1
    acc = gs.score(mod(mod(z, codes_a), codes_b)).mean().item()
    k, p = 4, r / 2
    right = sum(math.comb(k, j) * (1 - p) ** j * p ** (k - j) for j in range(3, k + 1))
    tie = math.comb(k, 2) * (1 - p) ** 2 * p**2
    m_bits = gs.message.float().mean().item()  # a tie votes 0: right when the message bit is 0
    expected = right + tie * (1 - m_bits)
    assert abs(acc - expected) < 0.02, (acc, expected)


def test_thresholds_meet_their_fpr_on_standard_normal_latents():
    g = torch.Generator().manual_seed(5)
    fpr = 0.05
    gs = GaussianShading(SHAPE, hw_copy=2, seed=6)
    null = torch.randn(4000, *SHAPE, generator=g)
    observed = (gs.score(null) >= gs.threshold(fpr)).float().mean().item()
    assert observed <= fpr + 3 * math.sqrt(fpr * (1 - fpr) / 4000)
    exact = sum(math.comb(192, t) for t in range(round(gs.threshold(fpr) * 192), 193)) / 2**192
    assert exact <= fpr < exact + math.comb(192, round(gs.threshold(fpr) * 192) - 1) / 2**192
    for scheme in (TreeRing(SHAPE, 3, 1), RingID(SHAPE, 3, 1), WIND(SHAPE, 16, 1)):
        tau = empirical_threshold(scheme.score(torch.randn(4000, *SHAPE, generator=g)), fpr)
        fresh = (scheme.score(torch.randn(4000, *SHAPE, generator=g)) > tau).float().mean().item()
        assert abs(fresh - fpr) < 4 * math.sqrt(fpr * (1 - fpr) / 4000), (type(scheme).__name__, fresh)


def test_empirical_threshold_by_hand():
    s = torch.arange(100.0)
    assert empirical_threshold(s, 0.05) == 94.0  # 95..99 above: 5 %
    assert empirical_threshold(s, 0.0) == 99.0


def test_calibrate_by_hand():
    cal = torch.arange(1000.0).flip(0)  # 0..999 in any order; 990..999 lie above 989: 1 %
    tau, fpr = calibrate(cal, torch.tensor([100.0, 989.0, 989.5, 2000.0]), 0.01)
    assert tau == 989.0 and fpr == 0.5  # 989.5 and 2000 exceed tau; a score equal to tau does not
    tau, fpr = calibrate(torch.tensor([3.0, 1.0, 2.0, 0.0]), torch.tensor([0.5, 1.5, 2.5, 3.5]), 0.25)
    assert tau == 2.0 and fpr == 0.5


def test_calibrate_refuses_the_in_sample_maximum():
    """16 nulls at 1 % FPR give the maximum as threshold (null FPR 0 by construction, steps of 1/16): refused."""
    with pytest.raises(ValueError, match="16 calibration null scores cannot resolve an FPR of 0.01: need at least 100"):
        calibrate(torch.randn(16), torch.randn(16), 0.01)
    with pytest.raises(ValueError, match="no test null scores"):
        calibrate(torch.randn(100), torch.randn(0), 0.01)
