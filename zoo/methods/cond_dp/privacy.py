"""DP-SGD for label DP on opacus, and Cond-DP's ``precondition`` realisation as a hook (paper §3; wiring *ours*).

Per step (batch B_t drawn by Poisson sampling at rate q, clip c, noise multiplier σ, sensitivity factor k)::

    ĝ_t = (1 / qN) [ Σ_{i∈B_t} clip_c(∇ℓ_i(θ_t)) + k σ c ξ_t ],   ξ_t ~ N(0, I)
    DP-SGD:   θ ← θ − η ĝ_t
    Cond-DP:  W ← W − η ĝ_t^W C     (first-layer weight W (h, d); every row's gradient left-multiplied by C)

Neighbouring relation: label DP changes one label, so one example's clipped gradient changes from g to g' with
‖g − g'‖ ≤ 2c. ``neighbouring="substitution"`` (default) sets k = 2: the noise is calibrated to sensitivity 2c and
opacus' RDP accountant is stepped with σ (its sampled-Gaussian bound for a sensitivity equal to the noise scale / σ).
``"add_remove"`` (k = 1) is opacus' usual relation, kept for comparison with papers that use it.

C is a function of public features only, so multiplying the *privatised* gradient by it is post-processing: the
accountant's step hook is left exactly as opacus attaches it, and ε is identical to DP-SGD at equal (σ, q, T).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from opacus import GradSampleModule
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier
from opacus.optimizers import DPOptimizer

#: Sensitivity of the clipped gradient sum in units of the clip c, per neighbouring relation.
SENSITIVITY_FACTOR = {"substitution": 2.0, "add_remove": 1.0}


class LabelDPOptimizer(DPOptimizer):
    """opacus ``DPOptimizer`` whose Gaussian noise has std ``k σ c`` (k = 2 for label substitution).

    ``noise_multiplier`` stays σ, so the accountant hook opacus attaches (which reads it) accounts σ with
    sensitivity k c. Everything else (clipping, Poisson averaging by the expected batch size, hooks) is opacus'.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, sensitivity_factor: float = 2.0, **kwargs):
        super().__init__(optimizer, **kwargs)
        self.sensitivity_factor = float(sensitivity_factor)

    def add_noise(self) -> None:
        sigma = self.noise_multiplier
        self.noise_multiplier = sigma * self.sensitivity_factor
        try:
            super().add_noise()
        finally:
            self.noise_multiplier = sigma


@dataclass
class PrivateTraining:
    """What :func:`make_private` wires together: the per-sample-gradient wrapper, the optimiser, the accountant."""

    module: GradSampleModule
    optimizer: LabelDPOptimizer
    accountant: RDPAccountant
    sample_rate: float
    noise_multiplier: float

    def epsilon(self, delta: float) -> float:
        """ε spent so far at ``delta`` (0 before the first step)."""
        return float(self.accountant.get_epsilon(delta)) if self.accountant.history else 0.0

    @property
    def steps(self) -> int:
        return int(sum(n for _, _, n in self.accountant.history))


def calibrate_noise(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """σ such that ``steps`` Poisson-subsampled Gaussian steps at rate q spend at most ``epsilon`` (RDP, opacus).

    Returns 0.0 for ``epsilon = inf`` (no noise). Raises ValueError for epsilon <= 0 or steps < 1.
    """
    if epsilon == float("inf"):
        return 0.0
    if epsilon <= 0 or steps < 1:
        raise ValueError(f"need epsilon > 0 and steps >= 1, got epsilon={epsilon}, steps={steps}")
    return float(
        get_noise_multiplier(
            target_epsilon=epsilon,
            target_delta=delta,
            sample_rate=sample_rate,
            steps=int(steps),
            accountant="rdp",
            epsilon_tolerance=0.005,
        )
    )


def precondition_grads(layer: torch.nn.Linear, C: torch.Tensor) -> None:
    """Replace the first layer's gradient G (h, d) by ``G C``, each output unit's input vector left-multiplied by
    the symmetric C; with a (d + 1, d + 1) C the bias is the last input column, ``[G, g_b] C``."""
    w, b = layer.weight, layer.bias
    if w.grad is None:
        return
    if C.shape[0] == w.shape[1] + 1:
        full = torch.cat([w.grad, b.grad[:, None]], 1) @ C.to(w.grad)
        w.grad, b.grad = full[:, :-1].contiguous(), full[:, -1].contiguous()
    else:
        w.grad = w.grad @ C.to(w.grad)


def add_preconditioner(optimizer: torch.optim.Optimizer, layer: torch.nn.Linear, C: torch.Tensor):
    """Cond-DP ``precondition``: after clip + noise + averaging, multiply the privatised first-layer gradient by C
    (:func:`precondition_grads`; C is (d, d), or (d + 1, d + 1) to include the layer's bias).

    On a ``DPOptimizer`` the hook goes on ``optimizer.original_optimizer``, whose ``step`` ``DPOptimizer.step``
    calls after ``pre_step()`` (so after the accountant's step hook); on a plain optimiser (non-private runs), on
    itself. Returns the hook handle.

    Raises:
        ValueError: C does not match the layer's input size (or input size + 1 with a bias).
    """
    d = layer.weight.shape[1]
    if C.shape not in ((d, d), (d + 1, d + 1)) or (C.shape[0] == d + 1 and layer.bias is None):
        raise ValueError(f"C has shape {tuple(C.shape)}, the layer's input size is {d}")
    target = getattr(optimizer, "original_optimizer", optimizer)
    return target.register_step_pre_hook(lambda *_: precondition_grads(layer, C))


def make_private(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    sample_rate: float,
    expected_batch_size: int,
    noise_multiplier: float,
    max_grad_norm: float,
    neighbouring: str = "substitution",
    preconditioner: tuple[torch.nn.Linear, torch.Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> PrivateTraining:
    """Wrap ``model``/``optimizer`` for label-DP SGD with an RDP accountant (what ``PrivacyEngine.make_private``
    does, with the label-substitution noise scale and an optional Cond-DP preconditioner).

    Args:
        model: the network; opacus hooks are added to its layers (calling ``model`` itself keeps working).
        optimizer: an optimiser over ``model``'s parameters.
        sample_rate: Poisson rate q of the training loader (expected batch ``qN``).
        expected_batch_size: qN, the divisor of the noisy sum (``loss_reduction="mean"``).
        noise_multiplier: σ (:func:`calibrate_noise`); max_grad_norm: per-example clip c (L2).
        neighbouring: ``substitution`` or ``add_remove`` (:data:`SENSITIVITY_FACTOR`).
        preconditioner: ``(first layer, C)`` for Cond-DP ``precondition``; None for DP-SGD / ``reparam``.

    Raises:
        ValueError: an unknown neighbouring relation.
    """
    if neighbouring not in SENSITIVITY_FACTOR:
        raise ValueError(f"neighbouring must be one of {sorted(SENSITIVITY_FACTOR)}, got {neighbouring!r}")
    gsm = GradSampleModule(model, loss_reduction="mean")
    dp_opt = LabelDPOptimizer(
        optimizer,
        sensitivity_factor=SENSITIVITY_FACTOR[neighbouring],
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        expected_batch_size=expected_batch_size,
        loss_reduction="mean",
        generator=generator,
    )
    accountant = RDPAccountant()
    dp_opt.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=sample_rate))
    if preconditioner is not None:
        add_preconditioner(dp_opt, *preconditioner)
    return PrivateTraining(gsm, dp_opt, accountant, sample_rate, noise_multiplier)
