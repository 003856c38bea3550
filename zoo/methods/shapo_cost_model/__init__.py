"""ShaPO's cost model: a Bradley-Terry harmfulness head on zoo-lm (see README.md)."""
