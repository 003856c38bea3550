"""SemBind: semantic binding of latent diffusion watermarks against black-box forgery (notes §1).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "sembind"
WHAT = (
    "SemBind: latent diffusion watermarks (Tree-Ring, Gaussian Shading, RingID, WIND) bound to image "
    "semantics by a contrastive hashing masker, against reprompt and imprint forgery; caption-conditioned "
    "pixel diffusion, proxy and semantic encoder trained here on CIFAR-10"
)
RECIPES = "`sembind.yaml`, `sembind-{generator,proxy,encoder}.yaml`, `paper/sembind-sd21.yaml`"
WEIGHTS = "`sembind.cifar`, `sembind.generator`, `sembind.proxy`, `sembind.encoder`"
STATUS = (
    "not at this scale: at a measured FPR of 0.005–0.013 (threshold from 1,000 held-out unmarked images), "
    "reprompt forgery is accepted on three plain watermarks (FAR 0.56–0.83 with the provider's model); "
    "SemBind r=1 stops it (FAR ≤ 0.08) but clean TPR falls to 0.02–0.27 because the masker's codes are "
    "unstable on held-out prompts; verification speed ratio 0.97 of plain Tree-Ring"
)
EXAMPLE = {"recipe": "sembind", "predict": ["a red truck"]}
BAD_ROW = {
    "recipe": "sembind-encoder.yaml",
    "files": {
        "captions.csv": "file,caption\nmissing.png,a red truck\n",
    },
    "overrides": ["data.dataset=folder", "data.path=."],
    "error": "captions.csv:2",
    "key": "data.path",
}
