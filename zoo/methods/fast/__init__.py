"""FAST: finetuning-aligned sequential training of sparse autoencoders vs block training (see README.md)."""
