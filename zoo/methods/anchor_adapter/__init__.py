"""Anchor-Adapter circuit under spurious-reward GRPO (Yan et al., arXiv 2601.11061) on a generated arithmetic task."""
