"""DeSI: deep single-index Fréchet regression for distribution-valued responses (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "frechet"
WHAT = (
    "DeSI: deep single-index Fréchet regression for distributions (W2), SPD, compositions and Laplacians "
    "(reconstruction, experimental)"
)
RECIPES = (
    "`desi.yaml` (HMD forecast), `desi-hmd2013.yaml`, `desi-compositions.yaml`, `desi-sim.yaml`, `paper/desi-sim.yaml`"
)
WEIGHTS = "`desi.hmd-forecast`, `desi.hmd2013`"
STATUS = (
    "reconstruction (abstract only). hmd2013 (FSI folds): DeSI A 5.71 / B 5.33 against GFR 6.24 and published"
    " FSI 6.42, but deep Fréchet 4.06; recovers planted indices on generated data (B: 1°–7.5°), loses to GFR "
    "on Laplacians; W₂ matrix 1,009× POT's batched `wasserstein_1d` but 0.64× its closed form (`ot.dist`, the"
    " same computation), log-Euclidean 1,528× geomstats"
)
EXAMPLE = {"recipe": "desi", "predict": ["data/mortality-distributions/desi_example_row.csv"]}
BAD_ROW = {
    "recipe": "desi.yaml",
    "files": {
        "resp.csv": "x,y_0,y_1,y_2\n0.1,0.0,0.5,1.0\n0.2,0.0,0.7,0.3\n0.3,0.0,0.4,1.0\n0.4,0.1,0.4,1.0\n",
    },
    "overrides": ["data.path=resp.csv", "data.space=distribution"],
    "error": "resp.csv:3",
    "key": "data.path",
}
