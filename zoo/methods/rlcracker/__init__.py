"""RLCracker: an RL-trained paraphraser that strips KGW and Unigram watermarks without the detector.

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "text"
WHAT = (
    "RLCracker: GRPO paraphrase attacker (semantic reward, token-level KL reward, no detector) against "
    "KGW and Unigram watermarks (LogitsProcessors + z detectors), with random-substitution, MiniLM-swap, "
    "plain-paraphrase and regeneration baselines and the robustness-radius curve"
)
RECIPES = (
    "`rlcracker-copy.yaml` → `rlcracker.yaml` (`model.watermark=unigram|kgw`), `rlcracker-smollm2.yaml` "
    "(SmolLM2-135M-Instruct as provider and attacker), `paper/rlcracker-qwen2.5-3b.yaml`"
)
WEIGHTS = "`rlcracker.copy`, `rlcracker.unigram`, `rlcracker.kgw`, `rlcracker.smollm2-unigram`, `rlcracker.smollm2-unigram-seed1`, `rlcracker.smollm2-unigram-seed2`"
STATUS = (
    "not at this scale: on zoo-lm the attackers remove 100 % of marks at 0 % success (MiniLM sim 0.21-0.30; "
    "paper 98.5 %); on SmolLM2-135M three attacker seeds remove 0.62 of short Unigram marks at success 0.20, "
    "about SmolLM2's own paraphrase (0.58 / 0.15)"
)
EXAMPLE = {
    "recipe": "rlcracker-copy",
    "predict": ["The quick brown fox jumps over the lazy dog while the farmer watches from the barn."],
}
BAD_ROW = {
    "recipe": "rlcracker.yaml",
    "files": {
        "texts.jsonl": '{"question": "q", "watermarked": "a text"}\n{"question": "q"}\n',
    },
    "overrides": ["data.path=texts.jsonl"],
    "error": "texts.jsonl:2",
    "key": "data.path",
}
