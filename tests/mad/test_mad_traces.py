"""Streamed trace moments against a stored trace matrix, couplings, scores, the sampler's flat limit, baselines."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from zoo.methods.mad.baselines import Mahalanobis, penultimate, spectral_scores, strip_scores
from zoo.methods.mad.scores import aggregate, anomaly_scores, couplings
from zoo.methods.mad.sgld import TraceMoments, sample_traces


def _traces(draws=40, n=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 3.0 + torch.randn(draws, n, generator=g).cumsum(1)  # correlated columns with an offset


def test_streamed_moments_match_the_full_matrix():
    t, ref = _traces(), torch.tensor([1, 4, 6])
    m = TraceMoments(t.shape[1], ref)
    for chunk in t.split(6):  # uneven chunks
        m.update(chunk)
    full = torch.corrcoef(t.T.double())
    assert torch.allclose(couplings(m, "pearson"), full[:, ref], atol=1e-6)
    cov = torch.cov(t.T.double(), correction=0)
    mu, var = t.double().mean(0), t.double().var(0, unbiased=False)
    ccc = 2 * cov[:, ref] / (var[:, None] + var[ref][None] + (mu[:, None] - mu[ref][None]) ** 2)
    assert torch.allclose(couplings(m, "ccc"), ccc, atol=1e-6)


def test_a_trusted_input_couples_with_itself_at_one():
    t, ref = _traces(), torch.tensor([0, 2, 5])
    m = TraceMoments(t.shape[1], ref)
    m.update(t)
    for kind in ("pearson", "ccc"):
        c = couplings(m, kind)
        assert torch.allclose(c[ref, torch.arange(3)], torch.ones(3, dtype=torch.float64), atol=1e-6)


def test_scores_mean_and_class_level_by_hand():
    c = torch.tensor([[0.9, 0.7, 0.1, 0.1], [0.2, 0.2, 0.6, 0.4]], dtype=torch.float64)
    classes = torch.tensor([0, 0, 1, 1])
    assert torch.allclose(aggregate(c, "mean"), torch.tensor([0.45, 0.35], dtype=torch.float64))
    assert torch.allclose(aggregate(c, "class", classes), torch.tensor([0.8, 0.5], dtype=torch.float64))


def _tiny():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.rand(24, 1, 4, 4), torch.arange(24) % 3
    return model, x, y, DataLoader(TensorDataset(x, y), batch_size=8)


def test_enormous_localisation_gives_flat_traces_and_finite_scores():
    model, x, y, loader = _tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    m = sample_traces(
        model, loader, x, y, torch.arange(6), draws=12, burn_in=2, chunk=4, lr=1e-3, localization=1e14, nbeta=100.0
    )
    assert m.n == 10 and m.var().max() < 1e-10
    for name, s in anomaly_scores(m, y[:6]).items():
        assert torch.isfinite(s).all(), name
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # weights restored
    moving = sample_traces(model, loader, x, y, torch.arange(6), draws=12, burn_in=2, lr=1e-3, localization=1.0)
    assert moving.var().min() > 0  # a loose localisation does move the losses
    with pytest.raises(ValueError):
        sample_traces(model, loader, x, y, torch.arange(6), draws=5, burn_in=5)


def test_baselines_on_known_cases():
    feats = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]] * 2) + torch.tensor(
        [[0.0, 0.0]] * 4 + [[10.0, 10.0]] * 4
    )
    labels = torch.tensor([0] * 4 + [1] * 4)
    maha = Mahalanobis(feats, labels).score(torch.tensor([[0.5, 0.5], [10.5, 10.5], [5.0, -5.0]]))
    assert (
        maha[0].item() == pytest.approx(maha[1].item(), rel=1e-4) and maha[2] > 10 * maha[0]
    )  # floats, not 0-d tensors
    pool = torch.cat(
        [torch.randn(50, 3, generator=torch.Generator().manual_seed(0)) * 0.1, torch.tensor([[5.0, 0, 0]])]
    )
    assert spectral_scores(pool, torch.zeros(51, dtype=torch.long)).argmax() == 50
    model, x, _, _ = _tiny()
    nn.init.zeros_(model[3].weight), nn.init.zeros_(model[3].bias)  # uniform predictions: entropy log 3
    assert torch.allclose(strip_scores(model, x[:5], x, n_overlays=3), torch.full((5,), -torch.log(torch.tensor(3.0))))
    assert penultimate(model, x).shape == (24, 8)
