"""Poisoning: exactly the requested fraction, labels as the attack says, triggers in range and in place."""

import pytest
import torch

from zoo.methods.mad.attacks import ATTACKS, CLEAN_LABEL, apply_trigger, poison


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("rate", [0.0, 0.05, 0.07])
def test_poisons_exactly_the_requested_fraction(attack, rate):
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(300, 3, 16, 16, generator=g), torch.arange(300) % 10
    xp, yp, idx = poison(x, y, attack, rate, target=0, seed=1)
    assert len(idx) == round(rate * 300) == len(set(idx.tolist()))
    changed = torch.where((xp != x).flatten(1).any(1) | (yp != y))[0]
    assert changed.tolist() == idx.tolist()  # exactly those images, no others
    if attack in CLEAN_LABEL:
        assert (y[idx] == 0).all() and torch.equal(yp, y)
    else:
        assert (y[idx] != 0).all() and (yp[idx] == 0).all()
    assert xp.min() >= 0 and xp.max() <= 1


def test_too_many_clean_label_images_raise_and_bad_names():
    y = torch.arange(100) % 10
    with pytest.raises(ValueError, match="only 10"):
        poison(torch.rand(100, 1, 8, 8), y, "sig", 0.2)
    with pytest.raises(ValueError):
        apply_trigger(torch.rand(2, 1, 8, 8), "trojan")


def test_badnets_patch_in_the_corner_and_fixed_patterns():
    x = torch.full((2, 3, 8, 8), 0.5)
    t = apply_trigger(x, "badnets", patch=3)
    assert torch.equal(t[:, :, :5], x[:, :, :5]) and torch.equal(t[:, :, :, :5], x[:, :, :, :5])
    assert t[0, 0, 7, 7] == 1 and t[0, 0, 7, 6] == 0
    # the trigger pattern is fixed by its trigger_seed, not the global RNG
    torch.manual_seed(0)
    a = apply_trigger(x, "blended")
    torch.manual_seed(1)
    assert torch.equal(a, apply_trigger(x, "blended")) and not torch.equal(
        a, apply_trigger(x, "blended", trigger_seed=9)
    )
    assert (apply_trigger(x, "wanet") - x).abs().max() < 1e-5  # warping a constant image changes nothing
