"""FAST: finetuning-aligned sequential training of sparse autoencoders vs block training (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "fast"
WHAT = (
    "FAST: finetuning-aligned sequential SAE training (one conversation per forward, mixing buffer) vs block "
    "training BT(P)/BT(F); sae-lens Standard and JumpReLU SAEs on the residual stream of zoo-lm.chat and "
    "SmolLM2-135M-Instruct"
)
RECIPES = (
    "`fast-sae.yaml`, `fast-sae-{jumprelu,bt-chat,bt-pretrain}.yaml`, `fast-smollm2.yaml`, "
    "`fast-smollm2-{jumprelu,bt-chat,bt-pretrain}.yaml`, `paper/fast-sae-qwen2.5-0.5b-it.yaml`"
)
WEIGHTS = "`fast.zoo-lm-chat-l2`, `fast.zoo-lm-chat-l2-jumprelu`"
STATUS = (
    "partly: log2 MSE on chat-template tokens (3 seeds) FAST < BT(F) < BT(P) on zoo-lm.chat (Standard, "
    "gradient clip: 1.742 < 1.803 < 2.912) and on SmolLM2-135M-Instruct (Standard 8.351 vs 14.6 / 14.709), "
    "but on SmolLM2 the margin is position 0: without it the Standard SAEs are level and BT(F) is best with "
    "JumpReLU (2.706 vs FAST 4.65); SmolLM2 Delta loss 106-279% at 16k training tokens"
)
EXAMPLE = {"recipe": "fast-sae", "predict": ["How do I bake bread?"]}
BAD_ROW = {
    "recipe": "fast-sae.yaml",
    "files": {
        "chats.jsonl": (
            '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n{not json\n'
        ),
    },
    "overrides": ["data.path=chats.jsonl"],
    "error": "chats.jsonl:2",
    "key": "data.path",
}
