"""The error types that mean "the user's input is wrong": the CLI prints them without a traceback."""
from zoo.core.bases import BaseError
from zoo.core.data import DataError
from zoo.core.export import ExportError
from zoo.core.hub import HubError
from zoo.core.recipe import RecipeError
from zoo.core.registry import RegistryError
from zoo.core.run import RunError

USER_ERRORS = (BaseError, DataError, ExportError, HubError, RecipeError, RegistryError, RunError)
