"""The built-in methods: every folder here with a ``module.py`` is one, its registry name the folder's name with
``_`` -> ``-`` (``zoo_lm`` -> ``zoo-lm``); found by listing the folder, so listing methods imports no method code and
adding a method touches only its own folder. Each package's ``__init__.py`` holds the method's facts
(:mod:`zoo.core.facts`)."""

from pathlib import Path

METHODS: dict[str, str] = {
    folder.name.replace("_", "-"): f"zoo.methods.{folder.name}.module"
    for folder in sorted(Path(__file__).resolve().parent.iterdir())
    if (folder / "module.py").is_file() and (folder / "__init__.py").is_file()
}
"""Registry name -> the module whose import registers the method (``@register_method``)."""
