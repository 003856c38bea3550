"""The tables: simulation checks (local accuracy, Thm 3.2 / 3.3), the additive baseline, and C-index / IBS on real
data. Every number goes through ``zoo.core.results.write_result``.

    python -m zoo.methods.survshap_iq.experiments sim        # results/survshap-iq/simulation-checks.json
    python -m zoo.methods.survshap_iq.experiments baseline   # results/survshap-iq/additive-baseline.json
    python -m zoo.methods.survshap_iq.experiments real       # results/survshap-iq/real-data.json
"""
from __future__ import annotations

import argparse
import tempfile

import numpy as np

from zoo.core.results import summarise, write_result
from zoo.methods.survshap_iq.baselines import interaction_share, surrogate_r2, survshap_t
from zoo.methods.survshap_iq.datamodule import SurvivalDataModule
from zoo.methods.survshap_iq.decomposition import classify_components, survfd
from zoo.methods.survshap_iq.explain import survshap_iq
from zoo.methods.survshap_iq.metrics import c_index, evaluation_times, integrated_brier_score, local_accuracy
from zoo.methods.survshap_iq.simulation import asymmetry_scenario, scenario, symmetric_background
from zoo.methods.survshap_iq.survival_models import ClosedFormModel, SksurvModel

METHOD = "survshap-iq"
TIMES = np.linspace(1.0, 69.0, 41)        # the authors explain 41 evenly spaced times


def _la(model, pts: np.ndarray, background: np.ndarray) -> float:
    f = model.target("survival", TIMES)
    curves = [survshap_iq(f, x, background, TIMES) for x in pts]
    la = local_accuracy(np.stack([c.prediction for c in curves]), np.stack([c.values.sum(1) for c in curves]))
    return float(la.max())


def simulation_checks(seeds=(0, 1, 2), n: int = 1000, n_points: int = 25) -> list[dict]:
    """Per scenario, model (closed-form truth, Cox PH, gradient boosting) and seed: the maximum over 41 times of the
    local-accuracy residual of exact k-SII (order 2, survival scale) (a) with the explained points as the
    background and (b) with a separate 50-row background sample; and for the truth whether SurvFD of log h recovers
    the true partition (Thm 3.2; scenarios 8-10 lie outside its hypothesis) and whether Thm 3.3's asymmetry shows."""
    rows = []
    for seed in seeds:
        sym = symmetric_background(200, seed)
        for k in range(1, 11):
            sc = scenario(k)
            X, t, e = sc.sample(n, seed)
            rng = np.random.default_rng(seed)
            pts = X[rng.choice(n, n_points, replace=False)]
            other = X[rng.choice(n, 50, replace=False)]
            dec = survfd(lambda Z, sc=sc: sc.log_hazard(Z, TIMES), pts, sym, TIMES)
            part_ok = float(classify_components(dec) == sc.true_partition())
            for name, model in (("truth", ClosedFormModel(sc)), ("coxph", SksurvModel("coxph").fit(X, t, e)),
                                ("gbsa", SksurvModel("gbsa", seed).fit(X, t, e))):
                rows.append({"scenario": k, "setting": sc.name, "model": name, "seed": seed,
                             "la_max_bg_explained": _la(model, pts, pts), "la_max_bg_sample": _la(model, pts, other),
                             "partition_recovered": part_ok if name == "truth" else None,
                             "thm32_applies": float(sc.theorem_3_2_applies)})
        asym = asymmetry_scenario()
        X, _, _ = asym.sample(n_points, seed)
        part = classify_components(survfd(lambda Z, a=asym: a.log_hazard(Z, TIMES), X, sym, TIMES))
        rows.append({"scenario": 0, "setting": asym.name, "model": "truth", "seed": seed,
                     "la_max_bg_explained": None, "la_max_bg_sample": None, "thm32_applies": 0.0,
                     "partition_recovered": float(part == asym.true_partition()),
                     "downward_x1_td": float(part.get((0,)) == "td"), "upward_x123_ti": float(part.get((0, 1, 2)) == "ti")})
    return rows


def additive_baseline(seeds=(0, 1, 2), n_points: int = 20) -> list[dict]:
    """SurvSHAP(t)-equivalent SV curves vs order-2 interactions on the closed-form survival of each scenario:
    surrogate-game R^2 (mean over points and 41 times) and the k-SII mass on pairs."""
    rows = []
    for seed in seeds:
        bg = symmetric_background(64, seed)
        for k in range(1, 11):
            sc = scenario(k)
            f = ClosedFormModel(sc).target("survival", TIMES)
            X, _, _ = sc.sample(n_points, seed + 100)
            rows.append({"scenario": k, "setting": sc.name, "seed": seed,
                         "r2_survshap_t_sv": float(np.mean([surrogate_r2(survshap_t(f, x, bg, TIMES), f, x, bg).mean()
                                                            for x in X])),
                         "r2_fsii_order2": float(np.mean([surrogate_r2(survshap_iq(f, x, bg, TIMES, index="FSII"),
                                                                       f, x, bg).mean() for x in X])),
                         "ksii_pair_share": float(np.mean([interaction_share(survshap_iq(f, x, bg, TIMES))
                                                           for x in X]))})
    return rows


def _net_metrics(recipe: str, dataset: str, seed: int) -> dict:
    from zoo.cli import main
    from zoo.core.build import load_module

    with tempfile.TemporaryDirectory() as tmp:
        code = main(["train", f"recipe={recipe}", f"seed={seed}", f"data.seed={seed}", f"data.dataset={dataset}",
                     "model.explain.n_points=0", "export.formats=[]", "logger.kind=none", f"out_dir={tmp}"])
        if code != 0:
            raise RuntimeError(f"training {recipe} failed with exit code {code}")
        run = next(p for p in __import__("pathlib").Path(tmp).glob("*/version_0"))
        module, _ = load_module(str(run), which="best")
        m = module.evaluate(SurvivalDataModule(dataset=dataset, seed=seed))
    return {"c_index": m["test/c_index"], "ibs": m.get("test/ibs")}


def real_data(seeds=(0, 1, 2), datasets=("gbsg2", "whas500", "veterans", "aids"), nets=("gbsg2",)) -> list[dict]:
    """Test C-index and IPCW integrated Brier score (10-90 % quantiles of the test times) per dataset, model and
    split seed: Cox PH, gradient boosting, random survival forest (scikit-survival), and DeepSurv / DeepHit through
    their recipes (best validation C-index checkpoint) on the datasets in ``nets``."""
    rows = []
    for seed in seeds:
        for ds in datasets:
            dm = SurvivalDataModule(dataset=ds, seed=seed)
            grid = evaluation_times(dm.time_train, dm.time_test)
            for kind in ("coxph", "gbsa", "rsf"):
                m = SksurvModel(kind, seed).fit(dm.X_train, dm.time_train, dm.event_train)
                rows.append({"dataset": ds, "model": kind, "seed": seed,
                             "c_index": c_index(dm.time_test, dm.event_test, m.predict_risk(dm.X_test)),
                             "ibs": integrated_brier_score(dm.time_train, dm.event_train, dm.time_test, dm.event_test,
                                                           m.predict_survival(dm.X_test, grid), grid)})
            if ds in nets:
                for name, recipe in (("deepsurv", "survshap-iq.yaml"), ("deephit", "survshap-iq-deephit.yaml")):
                    rows.append({"dataset": ds, "model": name, "seed": seed, **_net_metrics(recipe, ds, seed)})
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["sim", "baseline", "real"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    a = ap.parse_args(argv)
    seeds = tuple(a.seeds)
    if a.what == "sim":
        rows = simulation_checks(seeds)
        write_result(METHOD, "simulation-checks", rows,
                     summary=summarise(rows, ["la_max_bg_explained", "la_max_bg_sample", "partition_recovered",
                                              "downward_x1_td", "upward_x123_ti"],
                                       by=["scenario", "setting", "model"]),
                     paper={"local accuracy (exact SurvSHAP-IQ, simulations)": "< 0.015",
                            "Theorem 3.2": "exact partition recovery for linear / purely additive G",
                            "Theorem 3.3": "downward propagation to subsets of Z, none upward"},
                     notes="GENERATED data (simulation.py): n = 1000 per scenario and seed, 25 explained points, "
                           "41 times in [1, 69], exact k-SII order 2 on S(t|x). la_max_* = max over t of the "
                           "authors' LA(t); bg_explained: background = the explained points; bg_sample: a separate "
                           "50-row sample (its residual is the gap between two sample means). Partition: SurvFD of "
                           "the closed-form log h with a 200-row sign-symmetric background, relative tolerance 1e-6; "
                           "scenario 0 = the Thm 3.3 construction (x1 x3^2 log(t+1) + x1 x2 x3).")
    elif a.what == "baseline":
        rows = additive_baseline(seeds)
        write_result(METHOD, "additive-baseline", rows,
                     summary=summarise(rows, ["r2_survshap_t_sv", "r2_fsii_order2", "ksii_pair_share"],
                                       by=["scenario", "setting"]),
                     paper="qualitative: additive explanations miss the interactions the survival scale carries",
                     notes="Closed-form survival of each GENERATED scenario, 20 points x 41 times, 64-row "
                           "sign-symmetric background. SurvSHAP(t) = shapiq exact SV per time (an equivalent of the "
                           "survshap package, ours). R^2 of each explanation's surrogate game over all 8 coalitions.")
    else:
        rows = real_data(seeds)
        write_result(METHOD, "real-data", rows, summary=summarise(rows, ["c_index", "ibs"], by=["dataset", "model"]),
                     paper={"c_index": "not reported", "ibs": "not reported",
                            "reference (different data)": "TCGA-BRCA DeepHit-MIL: C-index 0.738, IBS 0.151"},
                     notes="scikit-survival's shipped datasets, seeded 65/15/20 % split per seed (the seed also "
                           "seeds the models). IBS: sksurv IPCW estimator on 50 times between the 10 % and 90 % "
                           "quantiles of the test times. DeepSurv / DeepHit: recipes survshap-iq(-deephit).yaml, "
                           "60 epochs, best validation C-index checkpoint.")


if __name__ == "__main__":
    main()
