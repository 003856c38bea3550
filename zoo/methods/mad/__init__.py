"""Mechanistic anomaly detection by functional attribution (SGLD loss-trace couplings against a trusted set).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = (
    "Mechanistic anomaly detection by functional attribution: localised RMSprop-SGLD loss traces, "
    "Pearson/concordance couplings with a trusted set (Mean-Corr, CLC, Mean-CCC, Class-CCC), DER/AUROC "
    "against STRIP, Mahalanobis and spectral signatures on backdoored CNNs (BadNets, Blended, SIG, WaNet,"
    " label-consistent)"
)
RECIPES = "`mad-badnets.yaml` (CIFAR-10), `mad-badnets-mnist.yaml`, `mad.yaml` (detector), `paper/mad*.yaml`"
WEIGHTS = "`mad.badnets-cifar10`, `mad.badnets-mnist`"
STATUS = (
    "not at this scale: trace scores detect backdoors (best-threshold DER 0.73 for CLC over 5 attack × "
    "dataset cells, 3 seeds, 60 draws) but Mahalanobis does better (0.84), paper 0.93 vs 0.83; at the "
    "recipe's full split and 100 draws Class-CCC reaches DER 0.999 on BadNets CIFAR-10, where the "
    "baselines are also perfect"
)
EXAMPLE = {"recipe": "mad-badnets", "predict": ["data/cifar10-subset/example_test_0.png"]}
BAD_ROW = (
    "image folders and image arrays: no rows to point at (a bad image is named by file and key, "
    "tests/platform/test_data.py)"
)
