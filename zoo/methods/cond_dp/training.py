"""A plain (non-Lightning) training loop over the same pieces as the module, for experiment grids and tests.

The LightningModule (``module.py``) is what ``train.py`` runs; grids of hundreds of short runs use this loop so
they do not pay a Trainer per run. Both call :func:`make_private` with the same arguments, the Poisson
``DPDataLoader`` and :class:`Regressor`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from opacus.data_loader import DPDataLoader
from torch.utils.data import DataLoader, TensorDataset

from zoo.methods.cond_dp.conditioning import psd_sqrt
from zoo.methods.cond_dp.networks import Regressor
from zoo.methods.cond_dp.privacy import add_preconditioner, calibrate_noise, make_private

MODES = ("none", "precondition", "reparam")


@dataclass
class FitResult:
    """A trained regressor with its privacy record and loss curve ``[(step, train MSE)]``."""

    model: Regressor
    epsilon_spent: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    curve: list[tuple[int, float]] = field(default_factory=list)


def mse(model: torch.nn.Module, X: np.ndarray, y: np.ndarray) -> float:
    """Mean squared error of ``model`` on (n, d) features and (n,) labels."""
    with torch.no_grad():
        pred = model(torch.as_tensor(X, dtype=torch.float32))
    return float(torch.mean((pred - torch.as_tensor(y, dtype=torch.float32)) ** 2))


def build_regressor(d: int, hidden, mode: str, C: np.ndarray | None, offset: float) -> Regressor:
    """A :class:`Regressor` for ``mode``; ``reparam`` gets the input map C^{1/2}."""
    if mode not in MODES:
        raise ValueError(f"conditioning mode must be one of {MODES}, got {mode!r}")
    if mode != "none" and C is None:
        raise ValueError(f"mode {mode!r} needs a conditioning matrix C")
    return Regressor(d, list(hidden), input_map=psd_sqrt(C) if mode == "reparam" else None, offset=offset)


def fit(
    X: np.ndarray,
    y: np.ndarray,
    *,
    hidden=(64, 64),
    mode: str = "none",
    C: np.ndarray | None = None,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    lr: float = 0.1,
    momentum: float = 0.9,
    max_grad_norm: float = 1.0,
    epochs: int = 5,
    batch_size: int = 256,
    seed: int = 0,
    offset: float = 0.0,
    private: bool = True,
    neighbouring: str = "substitution",
    record_every: int = 0,
) -> FitResult:
    """Train a regressor with label-DP SGD (``private``) or plain SGD.

    Args:
        X, y: (n, d) public training features, (n,) labels (already clipped to the declared range).
        mode: ``none`` (DP-SGD), ``precondition`` or ``reparam`` (Cond-DP).
        C: (d + 1, d + 1) conditioning matrix of ``[X, 1]`` for the Cond-DP modes
            (``conditioning_matrix(X, intercept=True)``).
        epsilon, delta: privacy target; σ is calibrated for ``epochs / q`` Poisson steps at q = batch_size / n.
        record_every: record the training MSE every this many steps (0 = never).
    """
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n, d = X.shape
    model = build_regressor(d, hidden, mode, C, offset)
    data = TensorDataset(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    q = min(1.0, batch_size / n)
    steps_per_epoch = max(1, int(1 / q))
    sigma, dp = 0.0, None
    if private:
        sigma = calibrate_noise(epsilon, delta, q, epochs * steps_per_epoch)
        pre = (model.first, torch.as_tensor(C, dtype=torch.float32)) if mode == "precondition" else None
        dp = make_private(
            model,
            opt,
            sample_rate=q,
            expected_batch_size=max(1, round(q * n)),
            noise_multiplier=sigma,
            max_grad_norm=max_grad_norm,
            neighbouring=neighbouring,
            preconditioner=pre,
            generator=g,
        )
        opt = dp.optimizer
        loader = DPDataLoader(data, sample_rate=q, generator=g)
    else:
        if mode == "precondition":
            add_preconditioner(opt, model.first, torch.as_tensor(C, dtype=torch.float32))
        loader = DataLoader(data, batch_size=batch_size, shuffle=True, generator=g)
    curve, step = [], 0
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.mean((model(xb) - yb) ** 2) if len(xb) else model(xb).sum() * 0.0
            loss.backward()
            opt.step()
            step += 1
            if record_every and step % record_every == 0:
                curve.append((step, mse(model, X, y)))
        if not math.isfinite(mse(model, X[:256], y[:256])):
            break  # diverged (too large a step size): stop, report as is
    eps = dp.epsilon(delta) if dp is not None else float("inf")
    return FitResult(model, eps, sigma, q, step, curve)
