"""ShaPO: sharpness-aware preference optimisation on an alignment-critical subspace (see README.md)."""
