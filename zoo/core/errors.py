"""The error types that mean "the user's input is wrong": the CLI prints them without a traceback.

Every such type subclasses :class:`UserError` (and the builtin it always was, ``ValueError`` or ``KeyError``), so the
CLI catches them without importing the modules that define them (``zoo list`` stays fast). Each concrete type is
imported from the module that defines it (``zoo.core.data.DataError``, ``zoo.core.recipe.RecipeError``, ...); this
module imports nothing of the zoo, so it sits below all of them.
"""


class UserError(Exception):
    """Base of every user-input error (bad recipe, data, base, export, hub id, registry name, run directory)."""


USER_ERRORS = (UserError,)
