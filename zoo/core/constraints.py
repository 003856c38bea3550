"""Value constraints declared with each constructor argument, read by the recipe-table generator
(:mod:`zoo.core.schema`) and checked before torch is imported.

A constraint is ``typing.Annotated`` metadata on the annotation, so the signature says it once::

    def __init__(self, sigma: Positive = 0.1, n_bins: PositiveInt = 20, test_fraction: Fraction = 0.2,
                 model: Literal["deepsurv", "deephit", "coxph"] = "deepsurv",
                 hidden: Annotated[list[PositiveInt], NonEmpty] | None = None,
                 explain: Annotated[dict | None, Keys(EXPLAIN, index=Literal["k-SII", "STII"])] = None): ...

``Literal`` gives the allowed values (a typo gets a "did you mean"), :class:`Range` a numeric range, :data:`NonEmpty`
a list with at least one item, ``list[X]`` checks each item against ``X``, :class:`Keys` a dict argument's keys
(taken from its defaults dict; a key's type from its default value unless given), and :class:`DataFile` what a data
file argument's file must hold, with :class:`Cell` what each column's values must be (read by the shared
line-numbered readers before torch, :mod:`zoo.core.datafiles`). This module imports nothing heavy: method modules
import it at the top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any


@dataclass(frozen=True)
class Range:
    """A numeric range: ``Range(0, 1)`` is ``0 <= x <= 1``; ``min_open``/``max_open`` make an end strict."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False

    def spec(self, describe=None) -> dict:
        out: dict[str, Any] = {}
        if self.min is not None:
            out.update(min=self.min, **({"min_exclusive": True} if self.min_open else {}))
        if self.max is not None:
            out.update(max=self.max, **({"max_exclusive": True} if self.max_open else {}))
        return out


@dataclass(frozen=True)
class Length:
    """A list's length: at least ``min`` items (``NonEmpty`` is ``Length(1)``)."""

    min: int = 1

    def spec(self, describe=None) -> dict:
        return {"min_length": self.min}


@dataclass(frozen=True)
class OneOf:
    """The allowed values, from a table the code already keeps (``Annotated[str, OneOf(STAGES)]``; a dict gives its
    keys); a ``Literal`` says the same where the values are written in the signature."""

    values: tuple | list | dict

    def spec(self, describe=None) -> dict:
        return {"choices": list(self.values)}


class Keys:
    """A dict argument's allowed keys: those of ``defaults`` (the dict the code merges the recipe's value over), each
    typed by its default value (``None``: anything; a non-empty dict: its own keys, typed the same way) unless
    ``specs`` gives an annotation for it (a constraint alias, a ``Literal``) or a ``Keys`` for a dict inside."""

    def __init__(self, defaults: dict, **specs: Any):
        unknown = sorted(set(specs) - set(defaults))
        if unknown:
            raise TypeError(f"Keys: {unknown} are not keys of the defaults ({sorted(defaults)})")
        self.defaults, self.specs = defaults, specs

    def spec(self, describe=None) -> dict:
        """``{"keys": {name: spec}}``; ``describe`` turns an annotation into a spec (``zoo.core.schema.describe``)."""
        keys = {}
        for k, v in self.defaults.items():
            spec = self.specs.get(k)
            if isinstance(spec, Keys):
                keys[k] = {"types": ["dict"], **spec.spec(describe)}
            elif spec is not None:
                keys[k] = describe(spec)
            elif isinstance(v, dict) and v:  # a dict of defaults inside: its own keys
                keys[k] = {"types": ["dict"], **Keys(v).spec(describe)}
            else:
                keys[k] = {} if v is None else describe(list if isinstance(v, tuple) else type(v))
        return {"keys": keys}


#: The kinds of :class:`Cell`: what one value of a data file's column (or JSONL key) must be.
CELL_TYPES = ("number", "integer", "text", "present", "choice", "file")


@dataclass(frozen=True)
class Cell:
    """What every value of one column of a user's CSV (or one key of a JSONL file) must be, checked before torch by
    :func:`zoo.core.datafiles.read_declared` (which the method's own reader calls too, so both refuse alike).

    Args:
        type: ``"number"`` (a finite number; CSV cells are converted to ``float``), ``"integer"`` (a whole number;
            converted to ``int``), ``"text"`` (non-blank text), ``"present"`` (anything but a missing value: empty,
            ``NA``, ``NaN``, ``null``, ``None``), ``"choice"`` (one of ``choices``, case-insensitive) or ``"file"`` (a
            file, relative to the data file's folder, whose name ends in one of ``choices``).
        range: a numeric :class:`Range` (number, integer).
        choices: the allowed values (choice) or file-name suffixes (file).
        increasing: each row's value is above the previous row's (number, integer).
    """

    type: str
    range: Range | None = None
    choices: tuple[str, ...] = ()
    increasing: bool = False

    def __post_init__(self):
        if self.type not in CELL_TYPES:
            raise TypeError(f"Cell: type must be one of {CELL_TYPES}, got {self.type!r}")

    def spec(self, describe=None) -> dict:
        out: dict[str, Any] = {"type": self.type, **(self.range.spec() if self.range else {})}
        if self.choices:
            out["choices"] = list(self.choices)
        if self.increasing:
            out["increasing"] = True
        return out


#: A finite number, a whole number, non-blank text, a value that is not missing.
NUMBER, INTEGER, TEXT, PRESENT = Cell("number"), Cell("integer"), Cell("text"), Cell("present")


@dataclass(frozen=True)
class DataFile:
    """A data-file argument whose file is read by the shared line-numbered readers (:mod:`zoo.core.data`) before torch
    is imported, so a malformed user file fails as ``file:line: ...`` in the time the recipe check takes
    (:func:`zoo.core.datafiles.check_data_files`). Only a file whose name ends in the kind's suffixes is checked (a
    folder, an ``.npz`` or a shipped file under ``data/`` is left to the datamodule, which checks everything again).
    The method's reader reads the file with the same declaration (:func:`zoo.core.datafiles.read_declared`), so the
    early check and the datamodule's refuse the same values with the same message.

    Args:
        kind: ``"csv"`` (``.csv``/``.csv.gz``: a header naming each column once, every row as long as the header,
            UTF-8 text) or ``"jsonl"`` (``.jsonl``/``.jsonl.gz``: one JSON object per non-blank line, UTF-8 text).
        columns: the columns (CSV) or keys (JSONL) every row needs.
        column_args: arguments of the same block whose values name further needed columns (``data.label``; a list
            value names one column per item; ``None`` names none).
        text: JSONL keys whose values must be strings.
        types: ``{column or column argument: Cell}``, what each value must be (a typed column that is not in
            ``columns`` is optional: checked where the file has it); ``"*"`` types every column that no other entry
            names (except ``ignore``).
        rest_of: a column argument that, left unset, means every column not named otherwise (``features``: "default:
            every other column"); those columns get its type.
        ignore: columns that ``"*"`` and ``rest_of`` leave out (an ``id`` column).
        layouts: alternative declarations: the header must hold the ``columns`` of one of them, and the first that it
            holds applies (its ``types``, ``rest_of``...); the outer ``columns``/``types`` are then empty.
        inside: the argument names a folder; the checked file is this file in it (``captions.csv``).
        when: ``{argument: value}`` of the same block under which the file is read this way (``{"format": "csv"}``).
        reader: ``"module:function"``, a shared reader of a nested format that imports no torch (the chat files:
            ``"zoo.data.chat:read_conversations"``), called as ``function(path, **options)`` instead of the column
            checks; option_args: arguments of the block passed to it too, by name, when set.
    """

    kind: str
    columns: tuple[str, ...] = ()
    column_args: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    types: Any = ()
    rest_of: str | None = None
    ignore: tuple[str, ...] = ()
    layouts: tuple[DataFile, ...] = ()
    inside: str | None = None
    when: Any = ()
    reader: str | None = None
    options: Any = ()
    option_args: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in ("csv", "jsonl"):
            raise TypeError(f"DataFile: kind must be 'csv' or 'jsonl', got {self.kind!r}")
        for name in ("types", "when", "options"):  # stored as pairs: Annotated metadata is hashed
            value = getattr(self, name)
            object.__setattr__(self, name, tuple(value.items()) if isinstance(value, dict) else tuple(value))
        if self.rest_of is not None and self.rest_of not in dict(self.types):
            raise TypeError(f"DataFile: rest_of {self.rest_of!r} needs a type in types")

    def spec(self, describe=None) -> dict:
        out: dict[str, Any] = {
            "kind": self.kind,
            "columns": list(self.columns),
            "column_args": list(self.column_args),
            "text": list(self.text),
        }
        if self.types:
            out["types"] = {k: c.spec() for k, c in self.types}
        if self.rest_of:
            out["rest_of"] = self.rest_of
        if self.ignore:
            out["ignore"] = list(self.ignore)
        if self.layouts:
            out["layouts"] = [d.spec()["file"] for d in self.layouts]
        if self.inside:
            out["inside"] = self.inside
        if self.when:
            out["when"] = dict(self.when)
        if self.reader:
            out.update(reader=self.reader, options=dict(self.options), option_args=list(self.option_args))
        return {"file": out}


NonEmpty = Length(1)
PositiveInt = Annotated[int, Range(1)]
NonNegativeInt = Annotated[int, Range(0)]
Positive = Annotated[float, Range(0, min_open=True)]
NonNegative = Annotated[float, Range(0)]
Probability = Annotated[float, Range(0, 1)]
#: A share of a set split off (validation, test): ``0 <= x < 1``.
Fraction = Annotated[float, Range(0, 1, max_open=True)]
#: Strictly between 0 and 1 (a false-positive rate, a mask ratio, a DP delta).
OpenUnit = Annotated[float, Range(0, 1, min_open=True, max_open=True)]
#: A discount factor: ``0 <= x < 1``.
Discount = Annotated[float, Range(0, 1, max_open=True)]
