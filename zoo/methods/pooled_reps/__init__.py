"""pooled-reps: mean-pooled hidden states of generated tokens vs grounded reference embeddings (Wang et al., ICML 2026).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "text"
WHAT = (
    "Pooled generation representations: mean-pooled hidden states of generated tokens vs reference-answer"
    " embeddings (unbiased CKA, mutual kNN, CKNNA; hook pooling during generate)"
)
RECIPES = (
    "`pooled-reps.yaml` (held-out Alpaca + HH), `pooled-reps-smollm2.yaml`, `pooled-reps-gemma3.yaml`, "
    "`pooled-reps-world.yaml`, `paper/pooled-reps-qwen3.yaml`"
)
WEIGHTS = "none (world adapter waits for adapter packages)"
STATUS = (
    "partly: on SmolLM2-135M-Instruct the mean pool beats every single token (CKA 0.364 vs 0.180 on "
    "held-out Alpaca, Δ 0.183 [0.120, 0.222]) and the prompt pool (0.246), where zoo-lm.chat on the same "
    "items shows no gain (Δ 0.001); the layer average falls below the best layer; hook pooling equals "
    "output_hidden_states to 5.7e-6 at 1.14x the throughput, holding 0.0088x the memory"
)
EXAMPLE = {"recipe": "pooled-reps", "predict": ["How do I bake bread?"]}
BAD_ROW = {
    "recipe": "pooled-reps.yaml",
    "files": {
        "items.jsonl": '{"prompt": "a", "reference": "b"}\n{"prompt": "a"}\n',
    },
    "overrides": ["data.sources=[user]", "data.path=items.jsonl"],
    "error": "items.jsonl:2",
    "key": "data.path",
}
