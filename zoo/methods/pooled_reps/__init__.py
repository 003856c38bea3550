"""pooled-reps: mean-pooled hidden states of generated tokens vs grounded reference embeddings (Wang et al., ICML 2026)."""
