"""zoo: a PyTorch Lightning model zoo of ICML 2026 methods.

Light to import: method code, torch and lightning load on first use.

>>> import zoo
>>> zoo.list_methods()            # registry names
>>> zoo.list_pretrained()         # zoo weight ids, <method>.<tag>
>>> m = zoo.create("zoo-lm", arch="zoo-lm-tiny")
>>> m = zoo.load("zoo-lm.chat")   # sha256-verified package
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["list_methods", "create", "list_pretrained", "load"]


def list_methods(pattern: str = "*") -> list[str]:
    """Registered method names matching ``pattern`` (fnmatch); imports no method code."""
    from zoo.core.registry import list_methods as _list

    return _list(pattern)


def create(name: str, **kwargs):
    """A new, untrained LightningModule of method ``name``; unknown kwargs fail naming the allowed ones, and values
    outside their declared ranges or choices (``zoo.core.constraints``) naming ``model.<key>`` and what is allowed."""
    from zoo.core import schema
    from zoo.core.registry import create as _create

    table = schema.method_schema(name)
    if table is not None:  # (an unknown keyword is the registry's to name, as for a plug-in)
        known = {k: v for k, v in kwargs.items() if k in table["module"]["args"]}
        schema.check_method_block(table, "model", known, name)
    return _create(name, **kwargs)


def list_pretrained(pattern: str = "*") -> list[str]:
    """Zoo weight ids (``<method>.<tag>``) in checkpoints/manifest.yaml matching ``pattern``."""
    from zoo.core.hub import list_pretrained as _list

    return _list(pattern)


def load(ref: str):
    """The trained LightningModule behind a zoo id, package folder or run directory (sha256-verified, eval mode), or a
    pretrained base id's module (``zoo.load("smollm2-135m-instruct")``: the base as released, see ``zoo list``)."""
    from zoo.core.loading import load_module

    return load_module(ref)[0]
