"""Model pieces several methods share: the zoo-lm causal LM, its tokenizer and chat encoding, and the small image
classifiers of ``vision`` (VGG-style CNN with any padding and depth, timm ResNet and ViT, MLP)."""
