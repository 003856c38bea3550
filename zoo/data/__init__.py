"""Datamodules and readers that several methods share (each with its schema in its docstring)."""
