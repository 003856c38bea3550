"""sf-consolidation: fast and slow successor features (Chua, Precup, Richards, ICML 2026) for continual RL under gradual drift."""
