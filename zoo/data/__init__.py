"""Datamodules and readers that several methods share (each with its schema in its docstring): the commuting-od
reader, and ``images`` (CIFAR-10 subset, MNIST, scikit-learn digits, a user's class folders)."""
