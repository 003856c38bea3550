"""Baselines beside DeSI, each ``fit_predict(X, Z, Xq, space, seed, groups) -> (k, m)`` projected embeddings
(``groups``: optional ``(n,)`` ids making bandwidth selection leave-one-group-out).

* ``frechet_mean``: the unconditional Fréchet mean.
* ``gfr``: global Fréchet regression (Petersen & Müller 2019) on all inputs.
* ``local_per_covariate``: local linear Fréchet regression on the single input (and bandwidth) with the smallest
  leave-one-out risk.
* ``fsi``: Fréchet single index (Bhattacharjee & Müller 2023; Ghosal, Meiring & Petersen 2023): β searched over
  random unit directions (first coordinate ≥ 0) by a binned criterion — k-means bins of X (ours; the R code bins
  differently), local linear fit at each bin's mean index against the bin's Fréchet mean — then the bandwidth by
  leave-one-out along the chosen direction.
* ``deep_frechet``: a network from X to the space's embedding trained on the squared metric, projected at prediction
  (after Iao, Zhou & Müller 2024; their manifold-learning representation step is replaced by the embedding: ours).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from zoo.methods.desi.frechet import global_weights, local_linear_weights, select_bandwidth
from zoo.methods.desi.spaces import Space


def frechet_mean(X, Z, Xq, space: Space, seed: int = 0, groups=None) -> np.ndarray:
    return np.repeat(space.frechet_mean(np.full(len(Z), 1 / len(Z)), Z), len(Xq), 0)


def gfr(X, Z, Xq, space: Space, seed: int = 0, groups=None) -> np.ndarray:
    return space.frechet_mean(global_weights(X, Xq), Z)


def local_predict(t, Z, tq, h, space: Space) -> np.ndarray:
    """Local linear Fréchet prediction at ``tq``, clamped to the range of ``t`` as DeSI's prediction is."""
    tq = np.clip(tq, np.min(t), np.max(t))
    W = local_linear_weights(torch.as_tensor(t, dtype=torch.float64), torch.as_tensor(tq, dtype=torch.float64), h)
    return space.frechet_mean(W.numpy(), Z)


def local_per_covariate(X, Z, Xq, space: Space, seed: int = 0, groups=None) -> np.ndarray:
    fits = [select_bandwidth(X[:, j], Z, space, groups=groups) + (j,) for j in range(X.shape[1])]
    h, _, j = min(fits, key=lambda f: f[1])
    return local_predict(X[:, j], Z, Xq[:, j], h, space)


def fsi_direction(
    X,
    Z,
    space: Space,
    seed: int = 0,
    n_dirs: int = 1000,
    n_bins: int | None = None,
    h_grid=(0.1, 0.2, 0.4),
    chunk: int = 100,
    groups=None,
) -> tuple[np.ndarray, float]:
    """FSI's direction search. Returns ``(β (p,), h)``; ``h`` chosen by leave-one-out along β."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(seed)
    n, p = X.shape
    D = rng.normal(size=(n_dirs, p))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    D *= np.where(D[:, :1] < 0, -1.0, 1.0)
    M = n_bins or int(min(max(n // 5, 5), 30))
    labels = KMeans(M, n_init=3, random_state=seed).fit_predict(X)
    keep = [lab for lab in range(M) if (labels == lab).any()]
    Xb = np.stack([X[labels == lab].mean(0) for lab in keep])
    Yb = np.stack(
        [
            space.frechet_mean(np.full((labels == lab).sum(), 1 / (labels == lab).sum()), Z[labels == lab])[0]
            for lab in keep
        ]
    )
    cnt = torch.as_tensor([(labels == lab).sum() for lab in keep], dtype=torch.float64)
    Xt, Zt, Xbt, Ybt = (torch.as_tensor(a, dtype=torch.float64) for a in (X, Z, Xb, Yb))
    best, crit = 0, np.inf
    for start in range(0, n_dirs, chunk):
        Dc = torch.as_tensor(D[start : start + chunk])
        T, Tb = (Xt @ Dc.T).T, (Xbt @ Dc.T).T  # (c, n), (c, M)
        for hk in h_grid:
            W = local_linear_weights(T, Tb, hk * T.std(1)[:, None, None])  # (c, M, n)
            err = (space.dist2(W @ Zt, Ybt) * cnt).sum(1)  # (c,)
            k = int(err.argmin())
            if float(err[k]) < crit:
                best, crit = start + k, float(err[k])
    beta = D[best]
    h, _ = select_bandwidth(X @ beta, Z, space, groups=groups)
    return beta, h


def fsi(X, Z, Xq, space: Space, seed: int = 0, groups=None, n_dirs: int = 1000) -> np.ndarray:
    beta, h = fsi_direction(X, Z, space, seed, n_dirs, groups=groups)
    return local_predict(X @ beta, Z, Xq @ beta, h, space)


def deep_frechet(
    X,
    Z,
    Xq,
    space: Space,
    seed: int = 0,
    groups=None,
    epochs: int = 300,
    hidden: int = 64,
    weight_decay: float = 1e-3,
    lr: float = 3e-3,
) -> np.ndarray:
    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Linear(X.shape[1], hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, Z.shape[1])
    )
    Xt, Zt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Z, dtype=torch.float32)
    mu, sd = Zt.mean(0), Zt.std(0).clamp(min=1e-6)
    w = torch.as_tensor(space.weights, dtype=torch.float32) * sd**2
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for rows in torch.randperm(len(Xt), generator=g).split(128):
            loss = (((net(Xt[rows]) - (Zt[rows] - mu) / sd) ** 2) * w).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        raw = (net(torch.as_tensor(Xq, dtype=torch.float32)) * sd + mu).double().numpy()
    return space.project(raw)


BASELINES = {
    "frechet-mean": frechet_mean,
    "gfr": gfr,
    "local-per-covariate": local_per_covariate,
    "fsi": fsi,
    "deep-frechet": deep_frechet,
}
