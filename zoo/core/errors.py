"""The error types that mean "the user's input is wrong": the CLI prints them without a traceback.

Every such type subclasses :class:`UserError` (and the builtin it always was, ``ValueError`` or ``KeyError``), so the
CLI catches them without importing the modules that define them (``zoo list`` stays fast). The concrete types are
importable from here too, loaded on first use.
"""

import importlib


class UserError(Exception):
    """Base of every user-input error (bad recipe, data, base, export, hub id, registry name, run directory)."""


USER_ERRORS = (UserError,)

_HOMES = {
    "BaseError": "zoo.core.bases",
    "DataError": "zoo.core.data",
    "ExportError": "zoo.core.export",
    "HubError": "zoo.core.hub",
    "RecipeError": "zoo.core.recipe",
    "RegistryError": "zoo.core.registry",
    "RunError": "zoo.core.run",
}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
