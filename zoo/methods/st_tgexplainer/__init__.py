"""ST-TGExplainer: self-explaining temporal link prediction with stability/transition patterns (see README.md)."""
