"""LTC (Locate-Then-Correct): debiasing CLIP through its attention heads."""
