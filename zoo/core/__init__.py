"""zoo's machinery: registry, recipes, runs, zoo weights, export, data helpers."""
