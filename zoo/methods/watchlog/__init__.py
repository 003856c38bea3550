"""WatchLog: EDR logs as video, a temporal cross-attention adapter, generated explanations (see README.md)."""
