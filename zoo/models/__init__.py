"""Model pieces several methods share: the zoo-lm causal LM, its tokenizer and chat encoding, activation access on
it (``activations``: residual stream, recorded submodules, steering), MiniLM sentence embeddings
(``text_embedding``, the ``text`` extra), and the small image classifiers of ``vision`` (VGG-style CNN with any
padding and depth, timm ResNet and ViT, MLP)."""
