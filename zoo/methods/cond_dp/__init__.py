"""Cond-DP: label-DP regression with DP-SGD conditioned on the public-feature spectrum (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "privacy"
WHAT = (
    "Cond-DP: label-DP regression with DP-SGD conditioned on the public-feature spectrum (opacus), with "
    "DP-SGD, RR-on-Bins, Laplace and sufficient-statistics baselines"
)
RECIPES = (
    "`cond-dp.yaml` (SF commuting flows), `cond-dp-linear.yaml`, `cond-dp-diabetes.yaml`, `cond-dp-dp-sgd.yaml`, "
    "`cond-dp-rr-bins.yaml`, `paper/cond-dp-criteo.yaml`"
)
WEIGHTS = "`cond-dp.commuting-sf-eps1`"
STATUS = (
    "partly: `reparam` beats DP-SGD, RR-on-Bins, Laplace and sufficient statistics on SF flows (linear at ε "
    "0.5/1/4, widest at 0.5; MLP at ε = 1), not on diabetes with an MLP; `precondition` loses to DP-SGD; part"
    " of the SF gain is preconditioning (non-private SGD with the same C: 0.361 vs 0.400 on SF linear); "
    "reduced grid; step time 0.99× / 1.04× opacus (target 1.10×)"
)
EXAMPLE = {
    "recipe": "cond-dp",
    "predict": ["06075010100", "06075010200"],
    # DP-SGD noise is calibrated to the planned steps: a finished run is never extended
    "extend_refused": "mixing the two would spend more than epsilon",
}
BAD_ROW = {
    "recipe": "cond-dp.yaml",
    "files": {
        "reg.csv": "x,y\n1.0,2.0\n2.0,abc\n3.0,4.0\n",
    },
    "overrides": ["data.path=reg.csv", "data.label=y", "data.y_min=0", "data.y_max=10"],
    "error": "reg.csv:3",
    "key": "data.path",
}
