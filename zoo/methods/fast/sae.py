"""The two SAE architectures of FAST (§3.2, App. A and C) as sae-lens training classes, and their schedules.

* Standard: ``f = ReLU(W_enc x + b_enc)``, ``x̂ = W_dec f + b_dec``, loss ``‖x − x̂‖² + λ Σ_k f_k ‖d_k‖`` (λ = 5):
  sae-lens ``StandardTrainingSAE``.
* JumpReLU: ``f = z ⊙ H(z − θ)``, loss ``‖x − x̂‖² + λ ‖f‖₀`` (λ = 0.01) with a rectangle-kernel straight-through
  estimator of bandwidth 0.001 and θ initialised to 0.001: sae-lens ``JumpReLUTrainingSAE``.

Both: Kaiming-uniform weights with unit-norm decoder rows and ``W_enc = W_decᵀ`` (sae-lens' initialisation with
``decoder_init_norm = 1``), ``b_dec`` at the geometric median of a data sample (:func:`geometric_median`),
``apply_b_dec_to_input = False`` (App. C). The learning rate warms up, holds, then cosine-decays to ``lr_end``
(:func:`lr_factor`); the sparsity coefficient warms up linearly (:func:`coefficient_warmup`).
"""

from __future__ import annotations

import math

import torch

ARCHITECTURES = ("standard", "jumprelu")


def build_sae(
    architecture: str,
    d_in: int,
    d_sae: int,
    l1_coefficient: float = 5.0,
    l0_coefficient: float = 0.01,
    jumprelu_bandwidth: float = 0.001,
    jumprelu_init_threshold: float = 0.001,
):
    """An sae-lens training SAE of the given architecture (float32, CPU).

    Raises:
        ValueError: an unknown architecture (named as ``model.sae``).
    """
    from sae_lens import JumpReLUTrainingSAE, JumpReLUTrainingSAEConfig, StandardTrainingSAE, StandardTrainingSAEConfig

    common = {"d_in": d_in, "d_sae": d_sae, "apply_b_dec_to_input": False, "decoder_init_norm": 1.0}
    if architecture == "standard":
        return StandardTrainingSAE(StandardTrainingSAEConfig(l1_coefficient=l1_coefficient, **common))
    if architecture == "jumprelu":
        return JumpReLUTrainingSAE(
            JumpReLUTrainingSAEConfig(
                l0_coefficient=l0_coefficient,
                jumprelu_bandwidth=jumprelu_bandwidth,
                jumprelu_init_threshold=jumprelu_init_threshold,
                **common,
            )
        )
    raise ValueError(f"model.sae: {architecture!r} is not one of {ARCHITECTURES}")


def sparsity_key(sae) -> str:
    """The name of the sparsity coefficient in ``TrainStepInput.coefficients`` (``"l1"`` or ``"l0"``)."""
    return next(iter(sae.get_coefficients()))


@torch.no_grad()
def geometric_median(points: torch.Tensor, max_iter: int = 100, ftol: float = 1e-20, eps: float = 1e-8) -> torch.Tensor:
    """Geometric median by Weiszfeld iterations (App. A): ``m ← Σ w_i p_i / Σ w_i`` with
    ``w_i = 1 / max(‖p_i − m‖, eps)``, from the mean, until the objective ``Σ ‖p_i − m‖`` improves by less than
    ``ftol`` relative.

    Args:
        points: ``[N, D]``.

    Returns:
        ``[D]``.
    """
    median = points.mean(dim=0)
    objective = (points - median).norm(dim=1).sum()
    for _ in range(max_iter):
        weights = 1.0 / (points - median).norm(dim=1).clamp_min(eps)
        median = (weights[:, None] * points).sum(dim=0) / weights.sum()
        new = (points - median).norm(dim=1).sum()
        if abs(objective - new) <= ftol * objective:
            break
        objective = new
    return median


def lr_factor(step: int, total: int, warmup_frac: float, decay_frac: float, end_ratio: float) -> float:
    """Multiplier of the base learning rate at ``step`` (App. C, scaled to our step count): linear warm-up over the
    first ``warmup_frac`` of ``total`` steps, constant, then cosine from 1 to ``end_ratio`` over the last
    ``decay_frac`` (the paper: 16k warm-up and 64k decay steps of 320k, 7e-5 to 7e-6)."""
    warm, decay = round(warmup_frac * total), round(decay_frac * total)
    if step < warm:
        return (step + 1) / warm
    start = total - decay
    if step < start or decay == 0:
        return 1.0
    frac = min(1.0, (step - start) / decay)
    return end_ratio + (1 - end_ratio) * 0.5 * (1 + math.cos(math.pi * frac))


def coefficient_warmup(value: float, step: int, warmup_steps: int) -> float:
    """Sparsity coefficient at ``step``: ``value · min(1, (step + 1) / warmup_steps)`` (sae-lens' linear warm-up;
    the paper warms up over 10k of 320k steps)."""
    return value if warmup_steps <= 0 else value * min(1.0, (step + 1) / warmup_steps)
