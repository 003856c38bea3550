"""The error types that mean "the user's input is wrong" (printed without a traceback by the CLI)."""
from __future__ import annotations


def _user_errors() -> tuple[type[BaseException], ...]:
    from zoo.core.data import DataError
    from zoo.core.hub import HubError
    from zoo.core.recipe import RecipeError
    from zoo.core.registry import RegistryError
    from zoo.core.run import RunError

    errs = [DataError, HubError, RecipeError, RegistryError, RunError]
    try:
        from zoo.core.export import ExportError

        errs.append(ExportError)
    except ImportError:  # torch missing: export cannot have been asked for
        pass
    return tuple(errs)


def __getattr__(name: str):
    if name == "USER_ERRORS":
        return _user_errors()
    raise AttributeError(name)
