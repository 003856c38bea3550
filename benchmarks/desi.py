"""Speed of DeSI's batched distance matrices against the named peers, measured in one run.

* W2 between 1-D distributions: ``Space("distribution").pairwise_dist2`` (quantile embedding, one ``torch.cdist``)
  vs two whole-matrix POT calls: ``ot.wasserstein_1d(U, V, p=2)`` once over all n^2 (u, v) column pairs (POT's
  batched 1-D solver: sorts and merges the CDFs; it does not know the inputs are already quantile functions), and
  ``ot.dist(Q, Q, "sqeuclidean") / m``, the 1-D closed form (W2^2 = integral of the squared quantile difference) as
  POT computes a whole cost matrix - the fair peer for this quantity, since it is the same computation as ours.
  (``ot.emd2`` would solve one network-flow LP per pair, n^2 of them, for a quantity with a closed form: no peer.)
* Log-Euclidean distances between SPD matrices: ``Space("spd").embed`` + ``pairwise_dist2`` vs geomstats
  ``SPDMatrices(r).metric.dist_pairwise`` with the log-Euclidean metric (geomstats 2.8 through the numpy-2 shim in
  ``tests/desi/geomstats_shim.py``; ``zoo/`` never imports geomstats).

Both sides compute the same matrix; agreement is checked to 1e-6 before timing. Timing by ``zoo.core.timing.compare``
(one warm-up call per side untimed, interleaved repeats in alternating order, one thread); ratio = peer / ours on
median CPU time.

    python benchmarks/desi.py [--n 300] [--m 101] [--r 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "desi"))

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.desi.spaces import Space


def w2_case(n: int, m: int, seed: int = 0):
    """Equal-weight samples of size m (sorted = quantile functions); POT's W2² is then our rectangle-rule d²."""
    import ot

    rng = np.random.default_rng(seed)
    Q = np.sort(rng.normal(rng.normal(size=(n, 1)), rng.uniform(0.5, 2, (n, 1)), (n, m)), axis=1)
    sp = Space("distribution", m)
    sp.weights = np.full(m, 1.0 / m)

    def ours():
        return sp.pairwise_dist2(Q).numpy()

    I, J = np.divmod(np.arange(n * n), n)

    def batched():
        return ot.wasserstein_1d(Q[I].T, Q[J].T, p=2).reshape(n, n)

    def closed_form():
        return ot.dist(Q, Q, metric="sqeuclidean") / m

    return ours, {
        "POT ot.wasserstein_1d, one call over all n^2 pairs": batched,
        "POT ot.dist sqeuclidean / m (1-D closed form)": closed_form,
    }


def spd_case(n: int, r: int, seed: int = 0):
    import geomstats_shim as gs

    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, r, r))
    Y = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(r)
    sp = Space("spd", r * r)

    def ours():
        return sp.pairwise_dist2(sp.embed(Y)).sqrt().numpy()

    def peer():
        return gs.log_euclidean_pairwise(Y)

    return ours, {"geomstats dist_pairwise": peer}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--m", type=int, default=101)
    ap.add_argument("--r", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    rows = []
    for name, (ours, peers) in (
        ("W2 distance matrix", w2_case(a.n, a.m)),
        ("log-Euclidean distance matrix", spd_case(a.n, a.r)),
    ):
        for peer_name, peer in peers.items():
            t = compare({"ours": ours, "peer": peer}, repeats=a.repeats, warmup=1, threads=1)
            diff = float(np.abs(t.outputs["ours"] - t.outputs["peer"]).max())
            if diff > 1e-6:
                raise AssertionError(f"{name}: ours and {peer_name} differ by {diff}")
            r = t.row("ours", "peer", clock="cpu")
            rows.append(
                {
                    "task": name,
                    "n": a.n,
                    "size": a.m if "W2" in name else a.r,
                    "peer": peer_name,
                    "ours_cpu_s": r["ours_cpu_s"],
                    "peer_cpu_s": r["peer_cpu_s"],
                    "ratio": r["ratio"],
                    "ours_wall_s": r["ours_s"],
                    "peer_wall_s": r["peer_s"],
                    "max_abs_diff": diff,
                }
            )
            print(rows[-1], flush=True)
    write_result(
        "desi",
        "bench-distances",
        rows,
        kind="benchmark",
        packages=["POT", "geomstats"],
        paper=(
            "target (issue #30): >= 20x, agreeing to 1e-6, set against a row-by-row POT loop; against "
            "POT's whole-matrix calls (issue #41) the closed form is the same computation as ours, "
            "so parity (ratio ~1) is the honest expectation there"
        ),
        notes=f"zoo.core.timing.compare: {t.describe()} n x n matrices. "
        "ratio = peer CPU seconds / our CPU seconds (process time; wall times beside it are "
        "inflated by the shared machine's load). Ours includes embedding (eigh log for SPD). "
        "The W2 peers are POT's whole-matrix calls (its batched 1-D solver over all pairs in one "
        "call, and the closed form through ot.dist); the earlier row-by-row loop (949x) is gone.",
    )


if __name__ == "__main__":
    main()
