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
WEIGHTS = "`shapo.zoo-lm-hh`"
STATUS = (
    "on a generated task with a known reward, token-level ShaPO's win rate equals DPO's within noise at 40% "
    "flips (paired +0.01 ± 0.02); the released weights reach 0.625 accuracy on unseen HH conversations; the main "
    "job on SmolLM2-135M-Instruct + LoRA (15 steps, one seed) moves held-out accuracy 0.475 → 0.575 on 40 pairs; on SmolLM2's controlled task (3 seeds × 3 flip rates) ShaPO-token equals DPO within noise, but 16 LoRA steps barely move the base; "
    "multi-GPU via FSDP2 (tested on 2 CPU processes only); DDP is allowed but untested"
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
