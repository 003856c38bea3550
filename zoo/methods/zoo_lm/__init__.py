"""zoo-lm: the small causal LM family trained here, the base of zoo's LLM methods (see README.md).

The method's facts (zoo/core/facts.py): read without importing torch by the registry, the README generator and
the platform tests."""

EXTRA = None
WHAT = "small Llama-style causal LM trained here, the base of the LLM methods"
RECIPES = "`zoo-lm.yaml`, `zoo-lm-chat.yaml`, `paper/zoo-lm-*-hf.yaml`"
WEIGHTS = "`zoo-lm.base`, `zoo-lm.chat`"
STATUS = "5.3M parameters: text has the right shape but is mostly incoherent (chat val ppl 365)"
EXAMPLE = {"recipe": "zoo-lm", "predict": ["How do I bake bread?"]}
BAD_ROW = {
    "recipe": "zoo-lm.yaml",
    "files": {
        "chats.jsonl": (
            '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n{not json\n'
        ),
    },
    "overrides": ["data.mode=chat", "data.path=[chats.jsonl]"],
    "error": "chats.jsonl:2",
    "key": "data.path",
}
