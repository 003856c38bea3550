"""ShaPO: sharpness-aware preference optimisation on an alignment-critical subspace (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = "ShaPO: geometry-aware preference optimisation (token and reward level) with DPO, IPO, rDPO, SimPO, Dr.DPO"
RECIPES = (
    "`shapo.yaml` (the main job: SmolLM2-135M-Instruct + LoRA), `shapo-dpo-smollm2.yaml`, `shapo-reward-smollm2.yaml`, "
    "`shapo-controlled-smollm2.yaml`, `shapo-zoo-lm.yaml` (zoo-lm.chat), `shapo-reward.yaml`, `shapo-dpo.yaml`, "
    "`shapo-controlled.yaml`, `paper/shapo-llama3.2-3b.yaml`"
)
WEIGHTS = "`shapo.smollm2-hh` (LoRA over SmolLM2-135M-Instruct), `shapo.zoo-lm-hh`"
STATUS = (
    "on SmolLM2-135M-Instruct + LoRA, token-level ShaPO equals DPO within noise on HH safety (3 seeds: paired "
    "harmful rate +0.009 ± 0.009, red-team refusal identical) and on a noisy-preference task with a known reward "
    "(3 flip rates × 3 seeds, every paired 95% CI contains 0), at budgets that move the base little (KL 1-6 nats); "
    "released shapo.smollm2-hh (LoRA); the main job runs in 538.5 s idle; multi-GPU via FSDP2 (tested on 2 CPU "
    "processes only); DDP is allowed but untested"
)
EXAMPLE = {"recipe": "shapo", "predict": ["How do I pick a lock?"]}
BAD_ROW = {
    "recipe": "shapo.yaml",
    "files": {
        "pairs.jsonl": '{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a", "chosen": "b"}\n',
    },
    "overrides": ["data.path=pairs.jsonl"],
    "error": "pairs.jsonl:2",
    "key": "data.path",
}
