"""LTC's locate and correct steps on cached head terms (notes §1.3, steps 1–5; the authors' ``main_bg.py`` and
``utils/eval_utils.py``, re-written).

Inputs are a :class:`~zoo.methods.ltc.decompose.Decomposition` (``heads (n, L, H, D)``, ``others (n, L + 1, D)``) and
the zero-shot classifier ``T (D, C)`` (columns: L2-normalised class text embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Head = tuple[int, int]


def logits(heads: torch.Tensor, others: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """Zero-shot logits ``(n, C)`` of the summed embedding (step 1): ``(Σ_{l,h} c_{l,h} + Σ_l m_l) · e_c``."""
    return (heads.sum((1, 2)) + others.sum(1)) @ T


def contrast(
    heads: torch.Tensor, T: torch.Tensor, pred: torch.Tensor, y: torch.Tensor, full_logits: torch.Tensor
) -> torch.Tensor:
    """Per-head contrast ``Δ (n, L, H) = ⟨c_{l,h}, e_ŷ⟩ − ⟨c_{l,h}, e_{y'}⟩`` (step 2), ``y'`` the runner-up class
    of ``full_logits (n, C)`` where ``ŷ = pred`` is correct, else the true label ``y``."""
    runner_up = full_logits.scatter(1, pred[:, None], float("-inf")).argmax(1)
    other = torch.where(pred == y, runner_up, y)
    lens = torch.einsum("nlhd,dc->nlhc", heads, T)  # per-head logit lens
    pick = lambda c: lens.gather(-1, c.view(-1, 1, 1, 1).expand(*lens.shape[:3], 1))[..., 0]
    return pick(pred) - pick(other)


def top_head_frequency(delta: torch.Tensor) -> torch.Tensor:
    """``F_A (L, H)``: the fraction of samples whose largest ``Δ`` is at head ``(l, h)`` (step 3); zeros if empty."""
    n, L, H = delta.shape
    if n == 0:
        return delta.new_zeros(L, H)
    counts = torch.bincount(delta.reshape(n, -1).argmax(1), minlength=L * H)
    return (counts.to(delta.dtype) / n).view(L, H)


def select_heads(f_wrong: torch.Tensor, f_right: torch.Tensor) -> tuple[list[Head], list[Head]]:
    """The 1/K rule (step 4): ``S = {F_{A−} − F_{A+} > 1/K}`` (spurious), ``Y = {F_{A+} − F_{A−} > 1/K}`` (salient),
    ``K`` the number of heads with non-zero frequency in either map; each sorted by decreasing margin."""
    K = int(((f_wrong > 0) | (f_right > 0)).sum())
    if K == 0:
        return [], []
    diff = f_wrong - f_right

    def pick(d: torch.Tensor) -> list[Head]:
        idx = (d > 1.0 / K).nonzero().tolist()
        return [tuple(i) for i in sorted(idx, key=lambda i: -float(d[i[0], i[1]]))]

    return pick(diff), pick(-diff)


@dataclass
class Located:
    """Located heads and the frequency maps they came from (``(L, H)`` each)."""

    spurious: list[Head]
    salient: list[Head]
    f_right: torch.Tensor
    f_wrong: torch.Tensor


def locate(
    heads: torch.Tensor,
    others: torch.Tensor,
    T: torch.Tensor,
    y: torch.Tensor,
    group: torch.Tensor,
    conflicting: tuple[int, ...] | None = (1, 2),
) -> Located:
    """Steps 1–4 on a validation split: contrast the top heads of correctly (``A+``) and wrongly (``A−``) classified
    samples of the bias-conflicting ``groups`` (``None``: all samples, the "full" variant)."""
    full = logits(heads, others, T)
    pred = full.argmax(1)
    delta = contrast(heads, T, pred, y, full)
    keep = torch.ones_like(y, dtype=torch.bool) if conflicting is None else torch.isin(group, torch.tensor(conflicting))
    right, wrong = keep & (pred == y), keep & (pred != y)
    f_right, f_wrong = top_head_frequency(delta[right]), top_head_frequency(delta[wrong])
    S, Y = select_heads(f_wrong, f_right)
    return Located(S, Y, f_right, f_wrong)


def mean_ablate(heads: torch.Tensor, which: list[Head], means: torch.Tensor | None = None) -> torch.Tensor:
    """Replace ``c_{l,h}`` of every head in ``which`` by its mean over the samples (or by ``means (L, H, D)``)."""
    out = heads.clone()
    m = heads.mean(0) if means is None else means
    for l, h in which:
        out[:, l, h] = m[l, h]
    return out


def text_directions(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Orthonormal directions ``U (k, D)`` from text-embedding pairs ``v_k = E(a_k) − E(b_k)`` (QR of ``[v_k]``)."""
    q, _ = torch.linalg.qr((pos - neg).T)
    return q.T


def inject(c: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """Knowledge injection (RoboShot's accept step, per head): for each ``u_k`` in turn,
    ``c ← c + cos(c, u_k) u_k/‖u_k‖; c ← c/‖c‖``. ``c (n, D)``, ``U (k, D)``."""
    for u in U:
        u = u / u.norm()
        c = c + (c @ u / c.norm(dim=-1))[:, None] * u
        c = c / c.norm(dim=-1, keepdim=True)
    return c


def reject(z: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """RoboShot's reject step: remove the projections of ``z (n, D)`` on the orthonormal rows of ``U``."""
    return z - (z @ U.T) @ U


def correct(
    heads: torch.Tensor, spurious: list[Head], salient: list[Head], U: torch.Tensor, means: torch.Tensor | None = None
) -> torch.Tensor:
    """Step 5: mean-ablate ``spurious`` heads and inject the directions ``U`` into ``salient`` heads."""
    out = mean_ablate(heads, spurious, means)
    for l, h in salient:
        out[:, l, h] = inject(out[:, l, h], U)
    return out
