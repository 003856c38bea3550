"""Baselines of LTC (notes §1.7), re-written: RoboShot on the final embedding, Ortho-Cali, TextSpan head ablation,
random-head ablation, and ERM / group-balanced linear probes (trained references)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from zoo.methods.ltc.locate import Head, inject, mean_ablate, reject


def roboshot(emb: torch.Tensor, T: torch.Tensor, U_reject: torch.Tensor, U_accept: torch.Tensor) -> torch.Tensor:
    """RoboShot (Adila et al., ICLR 2024) logits ``(n, C)``: normalise ``emb (n, D)``, remove the spurious
    directions ``U_reject (k, D)`` (orthonormal), then accept ``U_accept`` (:func:`~zoo.methods.ltc.locate.inject`)."""
    z = F.normalize(emb, dim=-1)
    z = inject(F.normalize(reject(z, U_reject), dim=-1), U_accept)
    return z @ T


def ortho_cali(
    T: torch.Tensor, spurious: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, lam: float = 1000.0
) -> torch.Tensor:
    """Ortho-Cali (Chuang et al., 2023, "Debiasing vision-language models via biased prompts"): class embeddings
    ``T (D, C)`` mapped by ``P* = P_0 (I + λ/|S| Σ_{(i,j)} (z_i − z_j)(z_i − z_j)ᵀ)^{-1}``, ``P_0 = I − A(AᵀA)^{-1}Aᵀ``
    the projection orthogonal to the spurious prompt embeddings ``A = spurious.T (D, m)``, ``(z_i, z_j) = (pos, neg)``
    rows: prompts that differ only in the spurious attribute. Returns the re-normalised ``(D, C)``."""
    A = spurious.T
    D = A.shape[0]
    eye = torch.eye(D, dtype=T.dtype)
    P0 = eye - A @ torch.linalg.solve(A.T @ A, A.T)
    d = pos - neg
    M = eye + lam * (d.T @ d) / len(d)
    P = P0 @ torch.linalg.inv(M)
    return F.normalize(P @ T, dim=0)


def text_span(C: torch.Tensor, texts: torch.Tensor, steps: int = 3) -> list[int]:
    """TextSpan (Gandelsman et al., 2024; greedy, re-written): the indices of ``steps`` texts that in turn explain the
    most variance of a head's outputs ``C (n, D)``, each chosen text's direction projected out of ``C`` and of the
    remaining texts (rows of ``texts (m, D)``, normalised)."""
    C = C - C.mean(0)
    Tx = F.normalize(texts, dim=-1)
    chosen: list[int] = []
    for _ in range(min(steps, len(Tx))):
        score = ((C @ Tx.T) ** 2).sum(0)
        score[chosen] = -1.0
        j = int(score.argmax())
        chosen.append(j)
        u = Tx[j] / Tx[j].norm().clamp_min(1e-12)
        C = C - (C @ u)[:, None] * u
        Tx = Tx - (Tx @ u)[:, None] * u
    return chosen


def textspan_heads(heads: torch.Tensor, texts: torch.Tensor, is_place: list[bool], layers: list[int]) -> list[Head]:
    """Heads in ``layers`` whose first TextSpan text is about the place (the heads Gandelsman et al. ablate)."""
    return [
        (l, h) for l in layers for h in range(heads.shape[2]) if is_place[text_span(heads[:, l, h], texts, steps=1)[0]]
    ]


def random_heads(layers: list[int], H: int, count: int, draws: int, seed: int) -> list[list[Head]]:
    """``draws`` sets of ``count`` distinct heads drawn uniformly from ``layers`` (the random-head control)."""
    pool = [(l, h) for l in layers for h in range(H)]
    rng = np.random.default_rng(seed)
    count = min(count, len(pool))
    return [[pool[i] for i in rng.choice(len(pool), count, replace=False)] for _ in range(draws)]


def ablate_logits(heads: torch.Tensor, others: torch.Tensor, T: torch.Tensor, which: list[Head]) -> torch.Tensor:
    """Logits after mean-ablating ``which``."""
    return (mean_ablate(heads, which).sum((1, 2)) + others.sum(1)) @ T


def linear_probe(
    x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, group: torch.Tensor | None = None, seed: int = 0
) -> torch.Tensor:
    """Logistic-regression probe on normalised embeddings; with ``group`` each sample is weighted by the inverse
    frequency of its group (group-balanced ERM). Returns test predictions ``(n_test,)``."""
    from sklearn.linear_model import LogisticRegression

    xtr = F.normalize(x_train, dim=-1).double().numpy()
    w = None
    if group is not None:
        counts = torch.bincount(group, minlength=4).double()
        w = (1.0 / counts[group]).numpy() * len(group) / 4
    clf = LogisticRegression(C=1.0, max_iter=2000, random_state=seed)
    clf.fit(xtr, y_train.numpy(), sample_weight=w)
    return torch.from_numpy(clf.predict(F.normalize(x_test, dim=-1).double().numpy())).long()
