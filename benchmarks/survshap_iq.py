"""Benchmark: explaining T time points with SurvSHAP-IQ in one vectorised pass vs T separate shapiq runs.

Peer: the authors' protocol, one shapiq run per time point with shapiq's own MarginalImputer on the model restricted
to that time point (``explain.survshap_iq_separate``). Ours: ``explain.survshap_iq`` (each coalition's imputed rows
go to the model once, for all T). Same background (all its rows), same index, order and budget; the script checks
that both give the same values (max abs difference printed) and writes the wall-time ratio (target >= T / 2), timed
by ``zoo.core.timing.compare`` (one untimed warm-up call per side, ``--repeats`` interleaved in alternating order,
one thread, medians).

    python benchmarks/survshap_iq.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.survshap_iq.datamodule import SurvivalDataModule
from zoo.methods.survshap_iq.explain import survshap_iq, survshap_iq_separate
from zoo.methods.survshap_iq.survival_models import SksurvModel


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="one point, T = 11 only (a smoke run; nothing written)")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    dm = SurvivalDataModule(dataset="gbsg2", seed=0)
    model = SksurvModel("gbsa", 0).fit(dm.X_train, dm.time_train, dm.event_train)  # the authors' GBSA
    rng = np.random.default_rng(0)
    bg = dm.X_train[rng.choice(len(dm.X_train), 16, replace=False)]
    points = dm.X_test[: (1 if a.quick else 2)]
    t_lo, t_hi = np.quantile(dm.time_train[dm.event_train], [0.05, 0.8])
    settings = (
        [("exact", "k-SII", None, 11)]
        if a.quick
        else [("exact", "k-SII", None, 11), ("exact", "k-SII", None, 41), ("kernel", "k-SII", 128, 11)]
    )
    rows = []
    for approximator, index, budget, T in settings:
        times = np.linspace(t_lo, t_hi, T)
        f = model.target("survival", times)
        for i, x in enumerate(points):
            args = (f, x, bg, times)
            kw = {"index": index, "approximator": approximator, "budget": budget}
            t = compare(
                {
                    "ours": functools.partial(survshap_iq, *args, **kw),
                    "peer": functools.partial(survshap_iq_separate, *args, **kw),
                },
                repeats=1 if a.quick else a.repeats,
                warmup=1,
                threads=1,
            )
            ours, peer = t.outputs["ours"], t.outputs["peer"]
            t_ours, t_peer = t.median("ours"), t.median("peer")
            assert ours.interactions == peer.interactions
            diff = float(np.abs(ours.values - peer.values).max())
            rows.append(
                {
                    "setting": f"{approximator} {index} p=8 T={T}" + (f" budget={budget}" if budget else ""),
                    "T": T,
                    "point": i,
                    "seconds_vectorised": t_ours,
                    "seconds_separate_shapiq": t_peer,
                    "ratio": t_peer / t_ours,
                    "target_ratio": T / 2,
                    "max_abs_diff": diff,
                }
            )
            print(rows[-1])
    if a.quick:
        return
    write_result(
        "survshap-iq",
        "vectorised-vs-separate",
        rows,
        kind="benchmark",
        paper="no speed figure in the paper; the issue's target is a ratio >= T/2",
        notes=f"GBSG2 (scikit-survival), GradientBoostingSurvivalAnalysis (100 trees, depth 3), 8 players, "
        f"16 background rows, 2 test patients, times between the 5 % and 80 % quantiles of the "
        f"training event times. Wall time on one process: {t.describe()} Load average "
        f"{os.getloadavg()[0]:.1f} at the end (2-core machine shared with other engineers).",
    )


if __name__ == "__main__":
    main()
