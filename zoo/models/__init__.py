"""Model pieces several methods share: the zoo-lm causal LM, its tokenizer and chat encoding."""
