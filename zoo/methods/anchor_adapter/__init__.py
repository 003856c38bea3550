"""Anchor-Adapter circuit under spurious-reward GRPO (Yan et al., arXiv 2601.11061) on a generated arithmetic task.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "anchor"
WHAT = (
    "Anchor-Adapter circuit: spurious-reward GRPO (ground truth, random, incorrect, format; μ = 2 clipped"
    " updates) on a generated arithmetic task with planted contamination; perplexity paradox, cross-model"
    " patching, logit lens, JSD, layer resets, MLP key scaling"
)
RECIPES = (
    "`anchor-adapter.yaml` (random reward + analyses), "
    "`anchor-adapter-{ground-truth,incorrect,format}.yaml`, `anchor-adapter-midtrain(-clean).yaml`, "
    "`anchor-adapter-midtrain(-clean)-smollm2.yaml` and `anchor-adapter[-{ground-truth,incorrect,format}]-smollm2.yaml`"
    " (stage 1 and GRPO on SmolLM2-135M-Instruct), "
    "`paper/anchor-adapter-qwen2.5-math-1.5b.yaml`"
)
WEIGHTS = (
    "`anchor-adapter.math`, `anchor-adapter.math-clean`, `anchor-adapter.random-grpo` (LoRA adapters over zoo-lm.base), "
    "`anchor-adapter.smollm2-math` (LoRA r = 16 over SmolLM2-135M-Instruct)"
)
STATUS = (
    "not at this scale: zoo-lm.base memorised nothing (leaked 0.020 vs clean 0.012 on benchmark B); "
    "SmolLM2-135M memorised the planted half of a harder B (1.00 vs 0.02), and 20 GRPO steps lowered it "
    "(random reward 0.47 ± 0.26, ground truth 0.09 ± 0.06, 3 seeds; paper +21.4 / +28.8 pp); no anchor found"
)
EXAMPLE = {"recipe": "anchor-adapter", "predict": ["Question: 23 + 48 - 17 = ?"]}
BAD_ROW = {
    "recipe": "anchor-adapter.yaml",
    "files": {
        "items.jsonl": '{"question": "1 + 2", "answer": 3}\n{"question": "2 + 2", "answer": "four"}\n',
    },
    "overrides": ["data.path=items.jsonl"],
    "error": "items.jsonl:2",
    "key": "data.path",
}
