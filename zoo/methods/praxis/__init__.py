"""PRAXIS: approximate Rashomon sets of sparse decision trees (see README.md)."""
