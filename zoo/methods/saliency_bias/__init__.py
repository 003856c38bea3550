"""Center-focused saliency bias: the corner-shift benchmark and the Center-Shift Index (CSI) for CNNs, ViTs, MLPs.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "vision"
WHAT = (
    "Centre-focused saliency bias: corner-shift benchmark, Center-Shift Index (ours), Adebayo "
    "randomisation, path counts, across CNNs (4 paddings, depths), ResNet, ViT, MLP"
)
RECIPES = "`saliency-bias.yaml` (CIFAR-10), `paper/saliency-bias.yaml`"
WEIGHTS = "`saliency-bias.cifar10-family`"
STATUS = (
    "partly: random-init centre prior on random inputs grows with depth, is largest without padding, "
    "absent with circular padding / ViT / MLP, matched by path counts; training pulls Grad-CAM onto the "
    "object for every VGG (3-seed MNIST grid, BatchNorm VGGs) but the unpadded VGG keeps its centre pull "
    "under Gradient, and only there is trained-vs-random similarity high (Spearman 0.75); saliency loop "
    "0.98-1.02x captum"
)
EXAMPLE = {"recipe": "saliency-bias", "predict": ["data/cifar10-subset/example_test_0.png"]}
BAD_ROW = (
    "image folders and image arrays: no rows to point at (a bad image is named by file and key, "
    "tests/platform/test_data.py)"
)
