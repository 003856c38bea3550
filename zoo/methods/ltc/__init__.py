"""LTC (Locate-Then-Correct): debiasing CLIP through its attention heads.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "clip"
WHAT = (
    "LTC (Locate-Then-Correct): exact per-head decomposition of an open_clip ViT, spurious heads "
    "mean-ablated, text directions injected into salient heads; RoboShot, Ortho-Cali, TextSpan, "
    "random-head and probe baselines"
)
RECIPES = "`ltc.yaml` (waterbirds-cifar, ours), `paper/ltc-vitb16.yaml`"
WEIGHTS = "`ltc.waterbirds-cifar`"
STATUS = (
    "not at this scale: the tiny CLIP pretrained in budget (6 epochs, 3 seeds) encodes only the place "
    "(zero-shot WG 0.3 %), LTC WG 0.7 % vs TextSpan 1.8 % (claim: >50 % gain); decomposition exact "
    "(ViT-B-16 included), 1.11× one `encode_image`"
)
EXAMPLE = {"recipe": "ltc", "predict": ["data/cifar10-subset/example_test_0.png"]}
BAD_ROW = (
    "image folders and image arrays: no rows to point at (a bad image is named by file and key, "
    "tests/platform/test_data.py)"
)
