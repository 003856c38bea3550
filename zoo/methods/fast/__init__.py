"""FAST: finetuning-aligned sequential training of sparse autoencoders vs block training (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = "fast"
WHAT = (
    "FAST: finetuning-aligned sequential SAE training (one conversation per forward, mixing buffer) vs "
    "block training BT(P)/BT(F); sae-lens Standard and JumpReLU SAEs on zoo-lm.chat's residual stream"
)
RECIPES = "`fast-sae.yaml`, `fast-sae-{jumprelu,bt-chat,bt-pretrain}.yaml`, `paper/fast-sae-qwen2.5-0.5b-it.yaml`"
WEIGHTS = "`fast.zoo-lm-chat-l2`, `fast.zoo-lm-chat-l2-jumprelu`"
STATUS = (
    "partly: log2 MSE on chat-template tokens (JumpReLU, 3 seeds) FAST 0.547 < BT(F) 1.042 < BT(P) 5.658 "
    "as in the paper; with the Standard SAE FAST and BT(F) tie; MiniLM feature quality does not favour "
    "FAST over BT(F)"
)
EXAMPLE = {"recipe": "fast-sae", "predict": ["How do I bake bread?"]}
BAD_ROW = {
    "recipe": "fast-sae.yaml",
    "files": {
        "chats.jsonl": ('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n'
                        "{not json\n"),
    },
    "overrides": ["data.path=chats.jsonl"],
    "error": "chats.jsonl:2",
    "key": "data.path",
}
