"""SemBind: semantic binding of latent diffusion watermarks against black-box forgery (notes §1)."""
