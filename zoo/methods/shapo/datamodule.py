"""ShaPO's data: preference pairs (prompt, chosen, rejected) through the shared reader in :mod:`zoo.data.preference`
(schema, default HH-RLHF harmless split and ``flip_rate`` in its docstring); shapo-cost-model reads the same pairs."""

from zoo.data.preference import PreferenceDataModule, format_prompt

__all__ = ["PreferenceDataModule", "format_prompt"]
