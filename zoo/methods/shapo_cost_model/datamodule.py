"""The cost model's data: the HH-RLHF harmless training pairs (never flipped), read by the shared
:class:`zoo.data.preference.PreferenceDataModule` (schema in :mod:`zoo.data.preference`); ShaPO reads the same pairs."""

from zoo.data.preference import PreferenceDataModule

__all__ = ["PreferenceDataModule"]
