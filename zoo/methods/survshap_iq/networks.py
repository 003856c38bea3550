"""The two survival networks: DeepSurv (Katzman et al. 2018) and DeepHit (Lee et al. 2018), as losses and
prediction rules on top of a small MLP. Torch in, torch out; shapes in each docstring."""

from __future__ import annotations

import warnings

import torch
from torch import nn


def mlp(n_in: int, hidden: list[int], n_out: int, dropout: float) -> nn.Sequential:
    """``Linear -> ReLU -> Dropout`` blocks then a linear head; ``hidden=[]`` gives a linear model."""
    layers, d = [], n_in
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU(), nn.Dropout(dropout)]
        d = h
    return nn.Sequential(*layers, nn.Linear(d, n_out))


def cox_loss(log_risk: torch.Tensor, time: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    """Negative Cox partial log-likelihood (Efron ties), mean over events; torchsurv's implementation.

    ``log_risk (n,)``, ``time (n,)``, ``event (n,) bool``. A batch without events gives 0 (no information)."""
    from torchsurv.loss.cox import neg_partial_log_likelihood

    if not bool(event.any()):
        return log_risk.sum() * 0.0
    with warnings.catch_warnings():  # torchsurv warns on every batch with tied times; Efron handles them
        warnings.simplefilter("ignore", UserWarning)
        return neg_partial_log_likelihood(log_risk, event, time, ties_method="efron", reduction="mean")


@torch.no_grad()
def breslow(log_risk: torch.Tensor, time: torch.Tensor, event: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Breslow's baseline cumulative hazard: ``H0(s) = sum_{t_i <= s, event} d_i / sum_{t_j >= t_i} exp(f_j)``.

    Returns:
        ``(times (K,), cumhaz (K,))`` at the distinct event times, float64.
    """
    t, e, r = time.double(), event.bool(), log_risk.double().exp()
    uniq = torch.unique(t[e])
    deaths = torch.stack([(e & (t == u)).sum() for u in uniq]).double()
    at_risk = torch.stack([r[t >= u].sum() for u in uniq])
    return uniq, torch.cumsum(deaths / at_risk, 0)


def cox_survival(
    log_risk: torch.Tensor, bh_times: torch.Tensor, bh_cumhaz: torch.Tensor, times: torch.Tensor
) -> torch.Tensor:
    """``S(t|x) = exp(-H0(t) exp(f(x)))`` with ``H0`` a right-continuous step; ``(n,), (T,) -> (n, T)``."""
    idx = torch.searchsorted(bh_times, times.to(bh_times.dtype), right=True) - 1
    h0 = torch.where(idx >= 0, bh_cumhaz[idx.clamp(min=0)], torch.zeros_like(bh_cumhaz[:1]))
    return torch.exp(-h0[None, :] * log_risk.double().exp()[:, None])


def discretise(time: torch.Tensor, cuts: torch.Tensor) -> torch.Tensor:
    """DeepHit's time index: the first cut ``>= time`` (times past the last cut map to the last), ``(n,)`` long."""
    return torch.searchsorted(cuts, time.to(cuts.dtype), right=False).clamp(max=len(cuts) - 1)


def deephit_loss(
    logits: torch.Tensor, time: torch.Tensor, event: torch.Tensor, cuts: torch.Tensor, alpha: float, sigma: float
) -> torch.Tensor:
    """DeepHit single-risk loss ``alpha * NLL + (1 - alpha) * ranking`` (pycox's convention for alpha).

    ``logits (n, K+1)``: probability mass on the K cuts plus "after the last cut". NLL: ``-log pmf[k]`` for an event
    at cut k, ``-log S(k) = -log sum_{j>k} pmf[j]`` for a censoring there. Ranking: mean over comparable pairs
    (``i`` has an event at ``k_i`` before ``t_j``) of ``exp(-(F_i(k_i) - F_j(k_i)) / sigma)`` with ``F`` the CDF.
    """
    pmf = torch.softmax(logits, dim=1)
    k = discretise(time, cuts)
    cdf = torch.cumsum(pmf, dim=1)
    eps = 1e-7
    p_event = pmf.gather(1, k[:, None])[:, 0]
    s_after = (1.0 - cdf.gather(1, k[:, None])[:, 0]).clamp(min=0)
    nll = -torch.where(event, torch.log(p_event + eps), torch.log(s_after + eps)).mean()
    F_at = cdf[:, k]  # F_at[j, i] = F_j(k_i)
    diff = torch.diagonal(F_at)[None, :] - F_at  # F_i(k_i) - F_j(k_i), row j, column i
    comparable = (event[None, :] & (time[None, :] < time[:, None])).to(pmf.dtype)
    n_pairs = comparable.sum()
    rank = (comparable * torch.exp(-diff / sigma)).sum() / n_pairs.clamp(min=1.0)
    return alpha * nll + (1.0 - alpha) * rank


def deephit_survival(logits: torch.Tensor, cuts: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
    """``S(t|x) = 1 - sum_{k: cut_k <= t} pmf[k]``: a step at each cut; ``(n, K+1), (K,), (T,) -> (n, T)``."""
    cdf = torch.cumsum(torch.softmax(logits.double(), dim=1), dim=1)
    idx = torch.searchsorted(cuts.double(), times.double(), right=True) - 1
    F = torch.where(idx[None, :] >= 0, cdf[:, idx.clamp(min=0)], torch.zeros_like(cdf[:, :1]))
    return (1.0 - F).clamp(min=0.0, max=1.0)
