"""Localised RMSprop-preconditioned SGLD and streamed per-input loss traces (paper §3 "Method", steps 1-2).

Our own sampler (~30 lines) instead of pinning ``devinterp<2``: the authors call
``devinterp.slt.sampler.estimate_learning_coeff_with_summary``, which devinterp 2 removed. It samples the localised
tempered posterior ``p(theta) ∝ exp(-n beta L_m(theta) - gamma/2 ||theta - theta*||^2)`` with the update

    V <- alpha V + (1 - alpha) g*g,     G = 1 / (eps + sqrt(V)),     g = grad of the mean batch loss
    theta <- theta - (lr/2) G (n beta g + gamma (theta - theta*) + lambda theta) + sqrt(lr G) sigma xi,  xi ~ N(0, I)

(the preconditioner is built from the likelihood gradient, as in Li et al. 2016's pSGLD and the notes' pseudo-code).
*Ours*: the localisation pull is integrated exactly over the step (an Ornstein-Uhlenbeck step with
``a = lr G gamma / 2``: ``theta - theta* <- e^-a (theta - theta*) - (1 - e^-a)/a * push + sqrt(lr G (1 - e^-2a)/(2a)) xi``),
which equals the Euler update above to first order in ``a`` (``a <= 0.05`` at the paper's defaults) and stays
stable for any ``gamma``: an enormous localisation pins every draw to ``theta*`` instead of diverging.

Traces are never stored whole: every draw's losses of all inputs (evaluated in batches) go into a buffer of
``chunk`` draws that :class:`TraceMoments` folds into running sums, so memory is ``O(chunk x inputs + inputs x refs)``
whatever the number of draws.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn


class RMSpropSGLD(torch.optim.Optimizer):
    """Localised RMSprop-SGLD (update in the module docstring); the anchor ``theta*`` is the parameters at creation.

    Args:
        lr: step size ``epsilon``; localization: ``gamma``; nbeta: ``n beta`` (inverse temperature x data size);
        alpha: RMSprop decay; eps: ``lambda_1`` (stabiliser of ``G``); noise_level: ``sigma``; weight_decay: ``lambda``.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-6,
        localization: float = 1e4,
        nbeta: float = 100.0,
        alpha: float = 0.99,
        eps: float = 0.1,
        noise_level: float = 1.0,
        weight_decay: float = 0.0,
    ):
        super().__init__(
            params,
            {
                "lr": lr,
                "localization": localization,
                "nbeta": nbeta,
                "alpha": alpha,
                "eps": eps,
                "noise_level": noise_level,
                "weight_decay": weight_decay,
            },
        )
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"anchor": p.detach().clone(), "V": torch.zeros_like(p)}

    @torch.no_grad()
    def step(self, closure=None):
        for gr in self.param_groups:
            for p in gr["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                st["V"].mul_(gr["alpha"]).addcmul_(p.grad, p.grad, value=1 - gr["alpha"])
                G = 1.0 / (gr["eps"] + st["V"].sqrt())
                a = 0.5 * gr["lr"] * gr["localization"] * G  # pull towards the anchor per step
                decay = torch.exp(-a)
                gain = torch.where(a > 0, -torch.expm1(-a) / a.clamp_min(1e-30), torch.ones_like(a))
                gain2 = torch.where(a > 0, -torch.expm1(-2 * a) / (2 * a).clamp_min(1e-30), torch.ones_like(a))
                push = 0.5 * gr["lr"] * G * (gr["nbeta"] * p.grad + gr["weight_decay"] * p)
                noise = (gr["lr"] * G * gain2).sqrt() * gr["noise_level"] * torch.randn_like(p)
                p.copy_(st["anchor"] + decay * (p - st["anchor"]) - gain * push + noise)


class TraceMoments:
    """Running sums over draws of per-input losses ``l (draws, N)``: enough for every Pearson and concordance
    coupling between the ``N`` inputs and ``R`` reference inputs ``ref`` (a subset of them).

    Sums are kept in float64 about the first folded draw (a shift that leaves covariances unchanged and keeps
    nearly flat traces free of cancellation).

    Attributes:
        n: draws folded; s1 ``(N,)``, s2 ``(N,)``: sums of shifted losses and their squares;
        cross ``(N, R)``: sums of products with the references; shift ``(N,)``.
    """

    def __init__(self, n_inputs: int, ref: torch.Tensor):
        self.ref = ref.long()
        self.n = 0
        self.shift: torch.Tensor | None = None
        self.s1 = torch.zeros(n_inputs, dtype=torch.float64)
        self.s2 = torch.zeros(n_inputs, dtype=torch.float64)
        self.cross = torch.zeros(n_inputs, len(self.ref), dtype=torch.float64)

    def update(self, losses: torch.Tensor) -> None:
        """Fold a chunk of draws ``losses (D, N)`` into the sums."""
        x = losses.double()
        if self.shift is None:
            self.shift = x[0].clone()
        x = x - self.shift
        self.n += x.shape[0]
        self.s1 += x.sum(0)
        self.s2 += (x * x).sum(0)
        self.cross += x.T @ x[:, self.ref]

    def mean(self) -> torch.Tensor:
        """Mean loss per input ``(N,)`` over the folded draws."""
        return self.s1 / self.n + self.shift

    def var(self) -> torch.Tensor:
        """Population variance per input ``(N,)``."""
        return (self.s2 / self.n - (self.s1 / self.n) ** 2).clamp_min(0)

    def cov(self) -> torch.Tensor:
        """Population covariance ``(N, R)`` between every input and every reference."""
        m = self.s1 / self.n
        return self.cross / self.n - m[:, None] * m[self.ref][None, :]


@torch.no_grad()
def per_input_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """Cross-entropy of every input, ``x (N, C, H, W)``, labels ``y (N,)`` -> ``(N,)``, in batches of ``batch``."""
    return torch.cat(
        [F.cross_entropy(model(x[i : i + batch]), y[i : i + batch], reduction="none") for i in range(0, len(x), batch)]
    )


def sample_traces(
    model: nn.Module,
    sampling: torch.utils.data.DataLoader,
    x: torch.Tensor,
    y_hat: torch.Tensor,
    ref: torch.Tensor,
    draws: int = 2000,
    burn_in: int = 250,
    chunk: int = 32,
    eval_batch: int = 512,
    seed: int = 42,
    **sgld,
) -> TraceMoments:
    """Run localised SGLD from ``model``'s weights and stream every input's loss trace into :class:`TraceMoments`.

    Args:
        model: the deployed classifier (its parameters are moved during sampling and restored afterwards).
        sampling: loader of ``(x, y)`` ground-truth batches that drive SGLD (cycled).
        x: inputs to trace ``(N, C, H, W)``; y_hat: their labels for the loss, the deployed model's own
            predictions ``(N,)`` (paper: ``l_i = CE(f_theta(x_i), y_hat_i)``).
        ref: indices into ``x`` of the reference (trusted) inputs.
        draws, burn_in: SGLD steps (one draw per step) and how many leading draws are discarded.
        chunk: draws buffered before folding; eval_batch: inputs per forward pass.
        sgld: keyword settings of :class:`RMSpropSGLD`.
    Returns:
        the moments of the ``draws - burn_in`` kept draws.
    Raises:
        ValueError: ``burn_in >= draws``.
    """
    if burn_in >= draws:
        raise ValueError(f"burn_in ({burn_in}) must be smaller than draws ({draws})")
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    was_training = model.training
    model.eval()
    moments, buf = TraceMoments(len(x), ref), []
    batches = itertools.cycle(sampling)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            opt = RMSpropSGLD(model.parameters(), **sgld)
            for s in range(draws):
                xb, yb = next(batches)
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
                if s >= burn_in:
                    buf.append(per_input_loss(model, x, y_hat, eval_batch))
                if len(buf) == chunk or (s == draws - 1 and buf):
                    moments.update(torch.stack(buf))
                    buf = []
    finally:
        model.load_state_dict(saved)
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return moments
