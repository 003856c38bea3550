"""Method registry: ``@register_method`` on a LightningModule, lazy lookup by name.

``zoo.methods.METHODS`` maps every registry name to the module that registers it (found from the folders under
``zoo/methods/``), so listing methods never imports method code; the first ``get_method(name)`` imports that module,
whose decorator fills ``_METHODS``. A method's other facts (its extra, README row, examples) are read from its
package's ``__init__.py`` (:mod:`zoo.core.facts`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zoo.core.errors import UserError
from zoo.core.facts import FactError, read_fact, undeclared


class RegistryError(UserError, KeyError):
    """An unknown or duplicate method name, or a constructor argument the class does not take."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class MethodEntry:
    """One registered method: its LightningModule class and its LightningDataModule class."""

    name: str
    module_cls: type
    datamodule_cls: type | None


_METHODS: dict[str, MethodEntry] = {}


def register_method(name: str, *, datamodule: type | None = None) -> Callable[[type], type]:
    """Class decorator registering a LightningModule under ``name``.

    Args:
        name: registry name (``zoo-lm``, ``praxis``); must be unique.
        datamodule: the LightningDataModule class recipes build for this method.

    Raises:
        RegistryError: ``name`` is already registered to another class.
    """

    def deco(cls: type) -> type:
        old = _METHODS.get(name)
        if old is not None and old.module_cls.__qualname__ != cls.__qualname__:
            raise RegistryError(f"method name {name!r} is registered twice: {old.module_cls} and {cls}")
        _METHODS[name] = MethodEntry(name, cls, datamodule)
        cls.method_name = name
        return cls

    return deco


def known_methods() -> dict[str, str]:
    """Built-in methods plus plug-ins named in ``$ZOO_PLUGINS`` (``name=package.module,...``)."""
    import os

    from zoo.methods import METHODS

    known = dict(METHODS)
    for item in filter(None, os.environ.get("ZOO_PLUGINS", "").split(",")):
        name, _, mod = item.partition("=")
        if not mod:
            raise RegistryError(f"ZOO_PLUGINS: {item!r} should be name=package.module")
        known[name.strip()] = mod.strip()
    return known


def list_methods(pattern: str = "*") -> list[str]:
    """Sorted registry names matching the fnmatch ``pattern``; imports no method code."""
    import fnmatch

    return sorted(n for n in set(known_methods()) | set(_METHODS) if fnmatch.fnmatch(n, pattern))


def method_fact(name: str, fact: str, default: Any = FactError) -> Any:
    """Fact ``fact`` of method ``name`` (:data:`zoo.core.facts.FACTS`), read from its package's ``__init__.py``
    without importing the method (a method registered in this process by ``register_method``, outside zoo/methods
    and ``$ZOO_PLUGINS``: from the package of the module that registered it).

    Raises:
        RegistryError: unknown method.
        FactError: not declared and no ``default``; the message names the file and what to add.
    """
    known = known_methods()
    if name not in known and name in _METHODS:  # registered in this process (a script, a notebook, a test)
        known[name] = _METHODS[name].module_cls.__module__
    if name not in known:
        raise RegistryError(f"unknown method {name!r}{suggest(name, known)}; known methods: {', '.join(sorted(known))}")
    return read_fact(name, known[name], fact, default)


def missing_facts(name: str) -> list[str]:
    """The facts (:data:`zoo.core.facts.FACTS`) method ``name``'s package does not declare (empty: all there)."""
    known = known_methods()
    if name not in known:
        raise RegistryError(f"unknown method {name!r}")
    return undeclared(known[name])


def method_extra(name: str) -> str | None:
    """The pyproject extra ``name`` needs beyond the core install (its ``EXTRA`` fact), or None."""
    return method_fact(name, "EXTRA", None)


def install_command(extra: str | None) -> str:
    """The command installing the pyproject ``extra``: ``pip install -e ".[graph]"`` (the core install for None)."""
    return f'pip install -e ".[{extra}]"' if extra else "pip install -e ."


def install_hint(name: str) -> str:
    """The install command that makes method ``name`` runnable: ``pip install -e ".[graph]"``."""
    return install_command(method_extra(name))


def method_missing(name: str) -> list[str]:
    """Distributions of method ``name``'s extra (its ``EXTRA`` fact) that are not installed (empty: the method is
    ready); see :func:`missing_requirements`. Imports no method code."""
    extra = method_extra(name)
    return missing_requirements(extra) if extra else []


def missing_requirements(extra: str) -> list[str]:
    """Distributions of the installed ``zoo`` package's ``extra`` that are not installed (empty: ready).

    Read from the package metadata (pyproject's optional-dependencies), so the extras are declared once.
    """
    import re
    from importlib import metadata

    try:
        reqs = metadata.requires("zoo") or []
    except metadata.PackageNotFoundError:
        return []
    missing = []
    for req in reqs:
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", req):
            dist = re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]
            if dist == "zoo":
                continue
            try:
                metadata.version(dist)
            except metadata.PackageNotFoundError:
                missing.append(dist)
    return missing


def suggest(word: str, choices) -> str:
    """A ' (did you mean X?)' hint, or '' when nothing is close; a word with non-ASCII letters gets them named (a
    look-alike Cyrillic or Greek letter makes the suggestion look identical on screen)."""
    import unicodedata

    word = str(word)
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    odd = [
        f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}) at position {i + 1}"
        for i, c in enumerate(word)
        if ord(c) > 127
    ]
    note = f"; {word!r} contains the non-ASCII character {', '.join(odd)}" if odd else ""
    return f" (did you mean {close[0]!r}?{note})" if close else f" ({note[2:]})" if note else ""


def get_method(name: str) -> MethodEntry:
    """The registered entry for ``name``, importing its module on first use.

    Raises:
        RegistryError: no such method (the message lists the known names and the closest one), or its extra is
            not installed (the message is the install command).
    """
    if name not in _METHODS:
        known = known_methods()
        if name not in known:
            raise RegistryError(
                f"unknown method {name!r}{suggest(name, known)}; known methods: {', '.join(sorted(known))}"
            )
        try:
            importlib.import_module(known[name])
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] == "zoo":
                raise
            raise RegistryError(f"{name} needs {install_hint(name)} (missing module {e.name!r})") from None
        if name not in _METHODS:
            raise RegistryError(f"module {known[name]} did not register method {name!r}")
    return _METHODS[name]


def check_kwargs(cls: type, kwargs: dict[str, Any], where: str) -> None:
    """Refuse keyword arguments ``cls.__init__`` does not take.

    Args:
        cls: the class about to be constructed.
        kwargs: the arguments from a recipe block or a ``create`` call.
        where: the recipe key path of the block (``model``, ``data``) for the message.

    Raises:
        RegistryError: naming the unknown key path, the closest allowed key and all allowed keys.
    """
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    allowed = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    for key in kwargs:
        if key not in allowed:
            raise RegistryError(
                f"{where}.{key}: {cls.__name__} takes no argument {key!r}{suggest(key, allowed)}; "
                f"allowed: {', '.join(allowed)}"
            )


def constructor_defaults(cls) -> dict[str, Any]:
    """``{argument: default}`` of ``cls.__init__`` for every argument that has one."""
    params = inspect.signature(cls.__init__).parameters
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def constructor_kwargs(cls, kwargs: dict) -> dict:
    """``kwargs`` restricted to what ``cls.__init__`` takes (saved hparams may carry extra entries)."""
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


def create(name: str, **kwargs: Any):
    """Construct the LightningModule registered as ``name`` with checked keyword arguments.

    Raises:
        RegistryError: unknown method, or a keyword the constructor does not take.
    """
    entry = get_method(name)
    check_kwargs(entry.module_cls, kwargs, "model")
    return entry.module_cls(**kwargs)


#: The pyproject extra an export format needs beyond the core install (``hf`` and ``torch_export`` need only
#: transformers and torch).
FORMAT_EXTRAS: dict[str, str] = {"onnx": "export"}


def format_not_ready(fmt: str) -> str | None:
    """``onnx export needs: pip install -e ".[export]" (missing onnxruntime)`` when export format ``fmt`` needs an
    extra (:data:`FORMAT_EXTRAS`) that is not installed, else None; imports nothing of the extra."""
    extra = FORMAT_EXTRAS.get(fmt)
    missing = missing_requirements(extra) if extra else []
    return f"{fmt} export needs: {install_command(extra)} (missing {', '.join(missing)})" if missing else None
