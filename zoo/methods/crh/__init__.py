"""CRH: the cylindrical representation hypothesis for activation steering (arXiv 2605.01844)."""
