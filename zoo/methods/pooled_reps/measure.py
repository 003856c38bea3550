"""Every readout of one domain against every reference space: the rows of the alignment table, the gain
``Δ = align(mean pool) − max_t align(h_t)`` with its bootstrap CI, and the curves the plots draw.

Readouts (notes §4; names are the ``readout`` column): ``last`` (h_T), ``best_single`` (the best h_t over t),
``mean`` (mean pool), ``prompt`` (prompt pool), ``seg1..seg3`` (segment means), ``mix_best`` (best r_α on the 0.1
simplex grid), ``layer_avg`` (mean pools of all readout layers averaged, each L2-normalised first: *ours*),
``mean@L{l}`` (mean pool at readout layer l), ``token_shuffle`` and ``shuffled_pairing`` (controls).
"""

from __future__ import annotations

import torch

from zoo.methods.pooled_reps.alignment import bootstrap_ci, cka, cknna, hsic_unbiased, mutual_knn, mutual_knn_scores
from zoo.methods.pooled_reps.readouts import (
    is_interior,
    mixture,
    prefix_mean,
    segment_means,
    simplex_grid,
    single_token,
    token_shuffle,
)
from zoo.models.generation_pool import PooledGeneration

_N_CANDIDATES = 8  # single positions re-scored inside each CKA bootstrap replicate (the best 8 on all items)


def _gram(X: torch.Tensor) -> torch.Tensor:
    X = torch.nn.functional.normalize(X.double(), dim=1)
    return X @ X.T


def _cka_gram(K: torch.Tensor, L: torch.Tensor) -> float:
    return float(hsic_unbiased(K, L) / (torch.sqrt(hsic_unbiased(K, K) * hsic_unbiased(L, L)) + 1e-6))


def readouts(pg: PooledGeneration, layer: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Named ``[n, D]`` readouts at readout ``layer`` (needs ``pg.states`` at that layer), plus per-layer mean pools."""
    if pg.states is None or pg.token_layer != layer:
        raise ValueError(f"per-position states at readout layer {layer} are needed (got {pg.token_layer})")
    H, n_t = pg.states, pg.lengths
    seg = segment_means(H, n_t)
    out = {
        "last": pg.last[layer],
        "mean": pg.mean[layer],
        "prompt": pg.prompt[layer],
        "seg1": seg[0],
        "seg2": seg[1],
        "seg3": seg[2],
        "layer_avg": torch.nn.functional.normalize(pg.mean, dim=2).mean(0),
        "token_shuffle": token_shuffle(H, n_t, seed),
    }
    out |= {f"mean@L{l}": pg.mean[l] for l in range(pg.mean.shape[0])}
    out |= {f"prompt@L{l}": pg.prompt[l] for l in range(pg.prompt.shape[0])}
    return out


def measure_domain(
    pg: PooledGeneration, spaces: dict[str, torch.Tensor], layer: int, k: int = 10, n_boot: int = 200, seed: int = 0
) -> dict:
    """All readouts of one domain against each reference space.

    Args:
        pg: the domain's pooled generations (``n`` rows, per-position states at ``layer``).
        spaces: ``{name: [n, d]}`` reference embeddings, rows paired with ``pg``'s.
        layer: readout layer of the single-token, segment and mixture readouts.
        k: neighbours of mutual k-NN and CKNNA. n_boot: bootstrap replicates. seed: shuffles and resamples.

    Returns:
        ``{"rows": [{space, readout, cka, mknn, cknna, ...}], "delta": [{space, pairing, delta_cka, ...}],
        "curves": {space: {"m": [...], "pool_cka": [...], "single_cka": [...], "pool_mknn": [...],
        "single_mknn": [...]}}, "simplex": {space: [(alpha, cka)]}}``.
    """
    n, T = pg.states.shape[0], pg.states.shape[1]
    k = min(k, n - 1)
    reps = readouts(pg, layer, seed)
    H, n_t = pg.states, pg.lengths
    seg = segment_means(H, n_t)
    singles = [single_token(H, n_t, t) for t in range(1, T + 1)]
    prefixes = [prefix_mean(H, n_t, m) for m in range(1, T + 1)]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    rows, deltas, curves, simplex = [], [], {}, {}
    for space, Y in spaces.items():

        def row(name, X, Yp=Y, space=space, **extra):
            rows.append(
                {
                    "space": space,
                    "readout": name,
                    "cka": cka(X, Yp),
                    "mknn": mutual_knn(X, Yp, k),
                    "cknna": cknna(X, Yp, k),
                    **extra,
                }
            )

        single_cka = [cka(X, Y) for X in singles]
        single_mknn = [mutual_knn(X, Y, k) for X in singles]
        best_t = max(range(T), key=single_cka.__getitem__)
        for name, X in reps.items():
            row(name, X)
        row("best_single", singles[best_t], t=best_t + 1)
        grid = [(a, cka(mixture(seg, a), Y)) for a in simplex_grid(0.1)]
        best_a, _best_v = max(grid, key=lambda x: x[1])
        row("mix_best", mixture(seg, best_a), alpha=list(best_a), interior=is_interior(best_a))
        row("shuffled_pairing", reps["mean"], Y[perm])
        simplex[space] = [(list(a), v) for a, v in grid]
        curves[space] = {
            "m": list(range(1, T + 1)),
            "single_cka": single_cka,
            "single_mknn": single_mknn,
            "pool_cka": [cka(X, Y) for X in prefixes],
            "pool_mknn": [mutual_knn(X, Y, k) for X in prefixes],
        }
        for pairing, Yp in (("true", Y), ("shuffled", Y[perm])):
            deltas.append({"space": space, "pairing": pairing, **_delta(reps["mean"], singles, Yp, k, n_boot, seed)})
    return {
        "rows": rows,
        "delta": deltas,
        "curves": curves,
        "simplex": simplex,
        "n": n,
        "k": k,
        "mean_length": float(n_t.float().mean()),
    }


def _delta(mean: torch.Tensor, singles: list[torch.Tensor], Y: torch.Tensor, k: int, n_boot: int, seed: int) -> dict:
    """``Δ = align(mean) − max_t align(h_t)`` for CKA and mutual k-NN, each with a percentile bootstrap CI over items.

    The CKA replicate keeps the distinct items of the resample (a duplicated item would count as a perfect
    off-diagonal match in the kernels; about 63% of n, so the interval is conservative) and re-scores the
    ``_N_CANDIDATES`` best positions only (Gram matrices sub-indexed; both *ours*); the mutual k-NN replicate resamples
    per-item overlaps on the full neighbour graphs (all positions).
    """
    L = _gram(Y)
    Km, Ks = _gram(mean), [_gram(X) for X in singles]
    full = [_cka_gram(K, L) for K in Ks]
    cand = sorted(range(len(Ks)), key=lambda t: -full[t])[:_N_CANDIDATES]

    def stat_cka(idx):
        idx = idx.unique()  # a repeated item would enter the kernels as a perfect off-diagonal match
        sub = lambda M: M[idx][:, idx]
        Ls = sub(L)
        return _cka_gram(sub(Km), Ls) - max(_cka_gram(sub(Ks[t]), Ls) for t in cand)

    s_mean = mutual_knn_scores(mean, Y, k)
    s_single = torch.stack([mutual_knn_scores(X, Y, k) for X in singles])  # [T, n]

    def stat_mknn(idx):
        return float(s_mean[idx].mean() - s_single[:, idx].mean(1).max())

    n = mean.shape[0]
    idx_all = torch.arange(n)
    lo_c, hi_c = bootstrap_ci(stat_cka, n, n_boot, seed)
    lo_m, hi_m = bootstrap_ci(stat_mknn, n, n_boot, seed)
    return {
        "delta_cka": stat_cka(idx_all),
        "delta_cka_lo": lo_c,
        "delta_cka_hi": hi_c,
        "delta_mknn": stat_mknn(idx_all),
        "delta_mknn_lo": lo_m,
        "delta_mknn_hi": hi_m,
    }
