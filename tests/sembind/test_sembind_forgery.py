"""Forgery with an identity generator (image = latent, inversion exact): plain watermarks accept a reprompted
forgery (same latent, other prompt), SemBind at r = 1 rejects it; the imprint attack and masker losses by hand."""

import math

import pytest
import torch

from zoo.methods.sembind.masker import SemanticMasker, hamming_stats, hash_losses, supcon_loss, train_masker
from zoo.methods.sembind.modulation import SemanticModulation
from zoo.methods.sembind.pipeline import imprint, verify_scores
from zoo.methods.sembind.watermarks import SCHEMES, build_scheme, empirical_threshold

SHAPE = (3, 16, 16)


@pytest.mark.parametrize("name", SCHEMES)
def test_identity_generator_far_is_one_plain_and_zero_with_sembind_at_r_one(name):
    g = torch.Generator().manual_seed(0)
    n, bits = 200, 64
    scheme = build_scheme(name, SHAPE, 11)
    mod = SemanticModulation(SHAPE, bits, 1.0, 12)
    prompt_code = torch.randint(0, 2, (n, bits), generator=g)  # the identity world's masker: code of the prompt
    forged_code = torch.randint(0, 2, (n, bits), generator=g)  # another prompt: an independent code
    z_w = scheme.inject(torch.randn(n, *SHAPE, generator=g), g)
    null = torch.randn(n * 10, *SHAPE, generator=g)
    null_code = torch.randint(0, 2, (n * 10, bits), generator=g)
    # plain: the marked image and the reprompted forgery share the latent, so the forgery passes
    tau = empirical_threshold(verify_scores(scheme, null), 0.01)
    assert (verify_scores(scheme, z_w) > tau).float().mean() == 1.0
    far_plain = (verify_scores(scheme, z_w) > tau).float().mean()
    # SemBind: generated latent Mod_m(z_w); the genuine image demodulates with its own code, the forgery with another
    z_T = mod(z_w, prompt_code)
    tau_s = empirical_threshold(verify_scores(scheme, null, mod, null_code), 0.01)
    tpr = (verify_scores(scheme, z_T, mod, prompt_code) > tau_s).float().mean()
    far_sembind = (verify_scores(scheme, z_T, mod, forged_code) > tau_s).float().mean()
    assert far_plain == 1.0 and tpr == 1.0
    if name == "wind":
        # every code bit is tiled to d/B = 12 entries, so a code at Hamming fraction h flips exactly h of the latent
        # and the forgery's cosine to its key is 1 - 2h, h ~ Binomial(64, 1/2) / 64: FAR = P(1 - 2h > tau)
        h = torch.arange(65) / 64
        pmf = torch.tensor([math.comb(64, k) / 2**64 for k in range(65)], dtype=torch.float64)
        expected = float(pmf[(1 - 2 * h) > tau_s].sum())
        assert abs(far_sembind - expected) < 0.08, (float(far_sembind), expected)
    else:
        # Gaussian Shading's 192 voted bits hang on only 64 code bits, so a wrong code's bit accuracy spreads wider
        # than the independent-bit null it is thresholded against (measured FAR ~0.2); the ring schemes fall to ~0
        limit = 0.35 if name == "gaussian-shading" else 0.05
        assert far_sembind <= limit, f"{name}: SemBind at r=1 still accepts {far_sembind:.2f} of forgeries"


def test_imprint_moves_the_inverted_latent_towards_the_target_within_the_budget():
    class Linear(torch.nn.Module):  # an invertible "inversion": z = 2x
        def invert(self, x, steps):
            return 2 * x

    cover, target = torch.zeros(2, 3, 4, 4), torch.full((2, 3, 4, 4), 0.5)
    forged = imprint(Linear(), cover, target, eps=8 / 255, iters=4, steps=1)
    assert (forged - cover).abs().max() <= 2 * 8 / 255 + 1e-6  # L∞ 8/255 in [0, 1] units
    assert torch.allclose(forged, torch.full_like(cover, 2 * 8 / 255))  # saturates towards the target


def test_masker_losses_by_hand():
    b = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    terms = hash_losses(b, torch.tensor([0, 0, 1]))
    assert terms["same"] == 0.0 and terms["orthogonal"] == 0.0  # <b0,b2> = 0: orthogonal codes cost nothing
    assert torch.isclose(terms["balance"], torch.tensor(((1.0) ** 2 + (1 / 3) ** 2) / 2))
    assert terms["quantisation"] == 0.0
    z = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), dim=1)
    # anchor 0: positive 1 (sim 1/T), negative 2 (0): -log(e^{1/T} / (e^{1/T} + 1)); anchor 2 has no positive
    t = 0.5
    expected = -torch.log(torch.exp(torch.tensor(1 / t)) / (torch.exp(torch.tensor(1 / t)) + 1))
    assert torch.isclose(supcon_loss(z, torch.tensor([0, 0, 1]), t), expected)
    codes = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0]])
    h = hamming_stats(codes, torch.tensor([0, 0, 1]))
    assert h["intra_hamming"] == 0.25 and abs(h["inter_hamming"] - (1.0 + 0.75) / 2) < 1e-6


def test_masker_learns_prompt_invariant_near_orthogonal_codes():
    torch.manual_seed(0)
    centres = torch.randn(12, 32) * 3
    labels = torch.arange(12).repeat_interleave(6)
    feats = centres[labels] + 0.3 * torch.randn(len(labels), 32)
    masker = SemanticMasker(32, hidden=64, proj_dim=32, n_bits=32, n_blocks=1)
    stats = train_masker(masker, feats, labels, {"contrast_epochs": 60, "hash_epochs": 120})
    assert stats["intra_hamming"] < 0.05 and 0.35 < stats["inter_hamming"] < 0.65, stats
