"""SurvFD and SurvSHAP-IQ (Langbein et al., ICML 2026): functional decomposition and time-indexed Shapley
interactions for survival models. See README.md in this folder.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "survival"
WHAT = (
    "SurvFD + SurvSHAP-IQ: functional decomposition and time-indexed Shapley interaction curves for survival "
    "models (DeepSurv, DeepHit, scikit-survival Cox/GBSA/RSF)"
)
RECIPES = (
    "`survshap-iq.yaml` (DeepSurv, GBSG2), `survshap-iq-deephit.yaml`, `survshap-iq-simulation.yaml`, "
    "`paper/survshap-iq.yaml`"
)
WEIGHTS = "`survshap-iq.deepsurv-gbsg2`, `survshap-iq.deephit-gbsg2`"
STATUS = (
    "partly: Thm 3.2 in all 7 covered scenarios and Thm 3.3 asymmetry reproduce on the closed forms; local "
    "accuracy is below 0.015 only with the background inside the explained set, 0.065–0.20 with a disjoint "
    "one (the gap between two sample means); DeepSurv GBSG2 C-index 0.668 (paper: not reported); one-pass "
    "explanation 33-36x faster than 41 separate shapiq runs; paper's TCGA case study not reproducible here"
)
EXAMPLE = {"recipe": "survshap-iq", "predict": ["age=60", "pnodes=12", "tgrade=2", "horTh=0"]}
BAD_ROW = {
    "recipe": "survshap-iq.yaml",
    "files": {
        "surv.csv": "time,event,x\n1.0,1,0.5\nsoon,0,0.1\n",
    },
    "overrides": ["data.path=surv.csv"],
    "error": "surv.csv:3",
    "key": "data.path",
}
