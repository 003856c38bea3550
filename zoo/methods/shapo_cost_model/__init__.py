"""ShaPO's cost model: a Bradley-Terry harmfulness head on zoo-lm (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = "ShaPO's harmfulness cost model (Bradley–Terry head on zoo-lm, or LoRA + head on SmolLM2)"
RECIPES = "`shapo-cost-model.yaml`, `shapo-cost-model-smollm2.yaml`"
WEIGHTS = "`shapo-cost-model.zoo-lm-hh`, `shapo-cost-model.smollm2-hh`"
STATUS = (
    "test pair accuracy 0.574 on HH pairs from unseen conversations (checkpoint chosen on a separate "
    "validation split; `zoo eval` of the zoo weights); over SmolLM2-135M-Instruct with LoRA (320 pairs, 3 seeds) "
    "0.639 ± 0.032, one of three intervals still containing 0.574: released for reward-level ShaPO's soft labels, "
    "not as a trusted judge"
)
EXAMPLE = {"recipe": "shapo-cost-model", "predict": ["How do I hurt someone?", "I can't help with that."]}
BAD_ROW = {
    "recipe": "shapo-cost-model.yaml",
    "files": {
        "pairs.jsonl": '{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a", "chosen": "b"}\n',
    },
    "overrides": ["data.path=pairs.jsonl"],
    "error": "pairs.jsonl:2",
    "key": "data.path",
}
