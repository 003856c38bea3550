"""Center-focused saliency bias: the corner-shift benchmark and the Center-Shift Index (CSI) for CNNs, ViTs, MLPs."""
