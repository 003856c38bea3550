"""A method's facts, declared once in its package's ``__init__.py`` and read from there by the registry, the README
generator (:mod:`zoo.core.readme`) and the registry-driven platform tests.

The package ``__init__.py`` imports nothing, so reading it never imports torch or the method's extra: ``zoo list``
learns a method's extra before the method can be imported. What a fact holds (:data:`FACTS`):

``EXTRA``
    the pyproject extra the method needs beyond the core install (``"graph"``), or ``None``.
``WHAT``, ``RECIPES``, ``WEIGHTS``, ``STATUS``
    the method's row of README's methods table (markdown): what it is, its recipes, its zoo weights and where it
    stands at this scale.
``EXAMPLE``
    the user's path through the CLI: ``{"recipe": "praxis", "predict": ["data/..."]}``, the recipe the lifecycle
    test trains (with its ``recipes/tiny/`` overlay) and the ``zoo predict RUN_DIR ...`` arguments (a path under
    ``data/`` is a shipped file); ``"extend_refused": WORDS`` where a finished run refuses more steps (cond-dp: its
    privacy budget is spent) and says WORDS.
``BAD_ROW``
    a user data file with one bad row and where the error must point: ``{"recipe": "praxis.yaml", "files":
    {"table.csv": "..."}, "overrides": ["data.path=table.csv"], "error": "table.csv:3", "key": "data.path"}``;
    or a string saying why the method's data have no rows to point at (image folders, arrays).

The export formats are the module class's ``export_formats`` (recorded in its table, ``zoo/core/schemas/``).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

FACTS: dict[str, str] = {
    "EXTRA": 'the pyproject extra the method needs beyond the core install ("graph"), or None',
    "WHAT": "README methods table: what the method is, one line of markdown",
    "RECIPES": "README methods table: its recipes, markdown (`praxis.yaml` (COMPAS), ...)",
    "WEIGHTS": "README methods table: its zoo weights, markdown (`praxis.compas`, or none and why)",
    "STATUS": "README methods table: where it stands at this scale, with the measured figures",
    "EXAMPLE": '{"recipe": NAME, "predict": [ARG, ...]}: the recipe a user trains first (it needs a recipes/tiny/ '
    "overlay) and the `zoo predict RUN_DIR ARG ...` arguments that work on that run (optionally "
    '"extend_refused": the words of the refusal when a finished run cannot be given more steps)',
    "BAD_ROW": '{"recipe": FILE, "files": {NAME: TEXT}, "overrides": [...], "error": "NAME:LINE", "key": "data.path"}: '
    "a data file with one bad row and where the error must point; or a string saying why the method's data "
    "have no rows (image folders)",
}


class FactError(LookupError):
    """A method's package declares no such fact (the message says which file and what to add)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def facts_package(module_path: str) -> ModuleType | None:
    """The package holding the facts of the method that ``module_path`` registers: its parent package
    (``zoo.methods.praxis`` for ``zoo.methods.praxis.module``); None for a plug-in that is a single module."""
    package = module_path.rpartition(".")[0]
    return importlib.import_module(package) if package else None


def read_fact(name: str, module_path: str, fact: str, default: Any = FactError) -> Any:
    """Fact ``fact`` (a key of :data:`FACTS`) of method ``name``, registered by ``module_path``
    (``zoo.core.registry.method_fact`` looks the path up).

    Raises:
        FactError: not declared and no ``default`` given; the message names the file and what to add.
    """
    package = facts_package(module_path)
    if package is not None and hasattr(package, fact):
        return getattr(package, fact)
    if default is not FactError:
        return default
    where = package.__file__ if package is not None else f"a package around {module_path} (a plug-in module has none)"
    raise FactError(f"{name}: {where} declares no {fact} = ...; add it: {FACTS[fact]} (zoo/core/facts.py)")


def undeclared(module_path: str) -> list[str]:
    """The facts of :data:`FACTS` that the package around ``module_path`` does not declare."""
    package = facts_package(module_path)
    return [f for f in FACTS if package is None or not hasattr(package, f)]
