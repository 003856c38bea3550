"""Concept directions from difference vectors and the cylinder decomposition (CRH §5.2-5.4).

A concept's difference vectors ``d_{q,c} = a_with - a_no`` (last-token residual states, one per question) share a
central axis ``mu_c`` (their mean); each ``d_q`` splits into an axial part along ``u = mu_c / |mu_c|`` and a
normal-plane part ``d_perp``. Steering adds ``v(L, lam) = L cos(theta) u + L sin(theta) (1 - lam) e_perp``.
"""

from __future__ import annotations

import torch

DIRECTIONS = ("diffmean", "mean_center", "pca", "probe")
"""The four directions of §5.3, in the order they are stored (``CRHModule.directions[c, k, layer]``)."""


def diffmean(diffs: torch.Tensor) -> torch.Tensor:
    """The central axis ``mu_c``: mean of the train difference vectors ``diffs [N, D]`` -> ``[D]`` (unnormalised)."""
    return diffs.mean(dim=0)


def mean_center(a_with: torch.Tensor, a_no: torch.Tensor) -> torch.Tensor:
    """Mean-center direction ``mean(a_with) - mean(a_no)`` of ``[N, D]`` activations -> ``[D]``.

    On paired data it equals :func:`diffmean` of ``a_with - a_no`` (linearity of the mean); the two differ only
    when the two sides hold different samples."""
    return a_with.mean(dim=0) - a_no.mean(dim=0)


def pca_direction(diffs: torch.Tensor, sign: str = "none") -> torch.Tensor:
    """First right-singular vector of the **uncentred** stacked ``diffs [N, D]`` (the authors' ``vt[0]``): unit ``[D]``.

    Args:
        sign: ``"none"`` keeps the SVD's arbitrary sign as the paper does (PC1 may point away from the concept);
            ``"align"`` flips it so that it has a non-negative dot product with :func:`diffmean`.

    Raises:
        ValueError: an unknown ``sign``.
    """
    if sign not in ("none", "align"):
        raise ValueError(f"pca_sign must be 'none' or 'align', got {sign!r}")
    vt = torch.linalg.svd(diffs.double(), full_matrices=False).Vh[0].to(diffs.dtype)
    if sign == "align" and float(vt @ diffmean(diffs)) < 0:
        vt = -vt
    return vt


def probe_direction(
    a_with: torch.Tensor, a_no: torch.Tensor, steps: int = 200, lr: float = 0.1, seed: int = 0
) -> torch.Tensor:
    """Logistic-regression probe ``Linear(D, 1)`` on ``{a_with: 1, a_no: 0}`` (``[N, D]`` each), full-batch Adam
    (lr 0.1, 200 steps as the authors); returns the weight vector normalised to unit length ``[D]``."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.cat([a_with, a_no]).float()
    y = torch.cat([torch.ones(len(a_with)), torch.zeros(len(a_no))])
    bound = 1.0 / x.shape[1] ** 0.5
    w = ((torch.rand(x.shape[1], generator=gen) * 2 - 1) * bound).requires_grad_()
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=lr)
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
            loss.backward()
            opt.step()
    w = w.detach()
    return w / w.norm().clamp_min(1e-12)


def cylinder(d: torch.Tensor, mu: torch.Tensor) -> dict[str, torch.Tensor]:
    """Split difference vectors ``d [..., D]`` about the axis ``mu [D]`` (§5.4).

    Returns:
        ``cos`` and ``sin`` of the angle theta between each ``d`` and ``mu`` (``[...]``), ``axial = <d, u>``,
        ``d_perp = d - <d, u> u`` and its unit direction ``e_perp`` (``[..., D]``; zero where ``d`` lies on the
        axis).
    """
    u = mu / mu.norm()
    axial = d @ u
    cos = axial / d.norm(dim=-1)
    sin = (1 - cos.clamp(-1, 1) ** 2).sqrt()
    d_perp = d - axial[..., None] * u
    e_perp = d_perp / d_perp.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return {"cos": cos, "sin": sin, "axial": axial, "d_perp": d_perp, "e_perp": e_perp}


def steer_lengths(mu_norm: float, c: float, n_steps: int = 25) -> torch.Tensor:
    """The schedule ``L_k in linspace(0, c |mu_c|, n_steps + 1)[1:]`` -> ``[n_steps]`` (c = 5 baselines, 3 penalty)."""
    return torch.linspace(0.0, c * float(mu_norm), n_steps + 1)[1:]


def penalty_vector(
    length: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, u: torch.Tensor, e_perp: torch.Tensor, lam: float
) -> torch.Tensor:
    """``v(L, lam) = L cos(theta) u + L sin(theta) (1 - lam) e_perp`` (§5.4).

    Args:
        length: ``[K]`` lengths L. cos, sin: scalars (one question). u: unit axis ``[D]``. e_perp: unit ``[D]``.
        lam: penalty on the normal-plane part (0: the question's own direction ``L d_q/|d_q|``; 1: axis only).

    Returns:
        ``[K, D]``, with ``|v|^2 = L^2 (cos^2 + (1 - lam)^2 sin^2)``.
    """
    return length[:, None] * (cos * u + sin * (1.0 - lam) * e_perp)[None, :]
