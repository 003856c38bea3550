"""Mechanistic anomaly detection by functional attribution (SGLD loss-trace couplings against a trusted set)."""
