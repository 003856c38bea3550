"""zoo-lm: the small causal LM family trained here, the base of zoo's LLM methods (see README.md)."""
