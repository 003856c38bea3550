"""The DeSI estimator (reconstruction, ours: only the abstract of arXiv 2606.06957 is readable; DeSI notes §8.3).

``m̂(x) = argmin_ω Σ_i s_in(t(x), h) d²(Y_i, ω)``: local linear Fréchet regression along a scalar index ``t(x)``,
with the index and ``log h`` trained on the cross-fitted (leave-one-out) risk ``(1/n) Σ_i d²(Y_i, m̂⁽⁻ⁱ⁾(x_i))`` of
the *unprojected* weighted mean; the projection onto the space is applied at prediction only.

* index ``linear`` (A): ``t = βᵀx`` with ``β = b/‖b‖`` on the unit sphere; importance of input j is ``|β_j|``.
* index ``deep`` (B): ``t = f_θ(x) = bᵀx + MLP_θ(x)`` (a linear skip, ours, so training starts from a single index);
  its direction ``β̂`` is the top eigenvector of the average gradient outer product ``(1/n) Σ ∇f(x_i)∇f(x_i)ᵀ``.

Both start from ``b`` = the least-squares direction of the responses' first principal score on x (ours).
The bandwidth is ``h = exp(log_h) · sd(t)`` over the reference set, so it is scale free for either index.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from zoo.methods.desi.frechet import cross_fitted_risk, local_linear_weights
from zoo.methods.desi.spaces import Space

INDEXES = ("linear", "deep")


def initial_direction(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Unit ``(p,)`` least-squares direction of the first principal score of ``Z (n, m)`` on ``X (n, p)`` (ours)."""
    Zc = Z - Z.mean(0)
    score = Zc @ np.linalg.svd(Zc, full_matrices=False)[2][0]
    Xc = np.c_[np.ones(len(X)), X - X.mean(0)]
    b = np.linalg.lstsq(Xc, score, rcond=None)[0][1:]
    b = b if np.linalg.norm(b) > 0 else np.eye(X.shape[1])[0]
    b = b / np.linalg.norm(b)
    return b * (1 if b[np.argmax(np.abs(b))] >= 0 else -1)


class SingleIndex(nn.Module):
    """Index network, bandwidth and the local linear Fréchet link.

    Args:
        p: number of inputs.
        index: ``linear`` (A) or ``deep`` (B).
        hidden: hidden widths of the deep index's MLP.
        h_init: initial bandwidth as a multiple of sd(t).
        kernel: ``gaussian`` or ``epanechnikov``.
    Raises:
        ValueError: an unknown index or ``p < 1``.
    """

    def __init__(
        self,
        p: int,
        index: str = "linear",
        hidden: tuple[int, ...] = (32, 32),
        h_init: float = 0.2,
        kernel: str = "gaussian",
    ):
        super().__init__()
        if index not in INDEXES:
            raise ValueError(f"index must be one of {INDEXES}, got {index!r}")
        if p < 1:
            raise ValueError(f"need at least one input, got p={p}")
        self.kernel = kernel
        self.b = nn.Parameter(torch.eye(p)[0].clone())
        self.log_h = nn.Parameter(torch.tensor(float(np.log(h_init))))
        self.mlp = None
        if index == "deep":
            layers, d = [], p
            for w in hidden:
                layers += [nn.Linear(d, w), nn.GELU()]
                d = w
            last = nn.Linear(d, 1)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
            self.mlp = nn.Sequential(*layers, last)

    def init_direction(self, X: np.ndarray, Z: np.ndarray) -> None:
        """Set ``b`` to :func:`initial_direction`."""
        with torch.no_grad():
            self.b.copy_(torch.as_tensor(initial_direction(X, Z), dtype=self.b.dtype))

    @property
    def beta(self) -> torch.Tensor:
        """``(p,)`` unit index direction: ``b/‖b‖`` (A) or the top AGOP eigenvector needs data: see ``direction``."""
        return self.b / self.b.norm()

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Index values ``(n,)`` of inputs ``X (n, p)`` (standardised units)."""
        t = X @ self.beta
        return t if self.mlp is None else t + self.mlp(X).squeeze(-1)

    def bandwidth(self, t_ref: torch.Tensor) -> torch.Tensor:
        return self.log_h.exp() * t_ref.detach().std().clamp(min=1e-8)

    def risk(
        self,
        X: torch.Tensor,
        Z: torch.Tensor,
        space: Space,
        rows: torch.Tensor | None = None,
        groups: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Cross-fitted risk on ``rows`` of the training set ``X (n, p)``, ``Z (n, m)`` (the training loss);
        ``groups (n,)`` makes it leave-one-group-out."""
        t = self(X)
        return cross_fitted_risk(t, Z, self.bandwidth(t), space, rows, self.kernel, groups)

    def weights(self, Xq: torch.Tensor, X_ref: torch.Tensor) -> torch.Tensor:
        """``(k, n)`` local linear weights of queries ``Xq (k, p)`` on the reference inputs. A query index outside
        the reference range is clamped to it (ours): a local line extrapolated with a small bandwidth can leave the
        data by orders of magnitude (seen on hmd2013, n = 29)."""
        t = self(X_ref)
        return local_linear_weights(t, self(Xq).clamp(t.min(), t.max()), self.bandwidth(t), kernel=self.kernel)

    def predict(self, Xq, X_ref, Z_ref, space: Space, project: bool = True) -> np.ndarray:
        """``(k, m)`` predicted embeddings (projected onto the space unless ``project=False``)."""
        dev, dt = self.b.device, self.b.dtype
        with torch.no_grad():
            W = self.weights(torch.as_tensor(Xq, dtype=dt, device=dev), torch.as_tensor(X_ref, dtype=dt, device=dev))
            raw = (W.double() @ torch.as_tensor(Z_ref, dtype=torch.float64, device=dev)).cpu().numpy()
        return space.project(raw) if project else raw

    def direction(self, X: torch.Tensor) -> np.ndarray:
        """``(p,)`` unit direction: β (A), or the top eigenvector of the average gradient outer product (B)."""
        if self.mlp is None:
            return self.beta.detach().cpu().numpy().astype(np.float64)
        X = torch.as_tensor(X, dtype=self.b.dtype).clone().requires_grad_(True)
        with torch.enable_grad():
            G = torch.autograd.grad(self(X).sum(), X)[0].detach().double()
        _, vecs = torch.linalg.eigh(G.T @ G / len(X))
        v = vecs[:, -1].cpu().numpy()
        return v * (1 if v[np.argmax(np.abs(v))] >= 0 else -1)


def fit_index(
    model: SingleIndex,
    X: np.ndarray,
    Z: np.ndarray,
    space: Space,
    epochs: int = 200,
    lr: float = 0.02,
    batch_size: int = 512,
    weight_decay: float = 0.0,
    seed: int = 0,
    groups: np.ndarray | None = None,
) -> list[float]:
    """Plain Adam loop on the cross-fitted risk (the LightningModule runs the same step); returns epoch losses."""
    g = torch.Generator().manual_seed(seed)
    X_, Z_ = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Z, dtype=torch.float32)
    G_ = None if groups is None else torch.as_tensor(np.unique(groups, return_inverse=True)[1])
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for _ in range(epochs):
        perm = torch.randperm(len(X_), generator=g)
        total = 0.0
        for rows in perm.split(batch_size):
            loss = model.risk(X_, Z_, space, rows, G_)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(rows)
        losses.append(total / len(X_))
    return losses


def angle_degrees(a: np.ndarray, b: np.ndarray) -> float:
    """Angle between the lines spanned by ``a`` and ``b`` (sign-free), in degrees."""
    c = abs(float(np.dot(a, b))) / (np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.degrees(np.arccos(min(1.0, c))))


def direction_error(beta_hat: np.ndarray, beta: np.ndarray) -> float:
    """``min(‖β̂ − β‖, ‖β̂ + β‖)`` for unit vectors (the simulations' metric)."""
    bh, b = beta_hat / np.linalg.norm(beta_hat), beta / np.linalg.norm(beta)
    return float(min(np.linalg.norm(bh - b), np.linalg.norm(bh + b)))
