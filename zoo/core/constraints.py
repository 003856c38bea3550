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
file argument's file must hold (read by the shared line-numbered readers before torch, :mod:`zoo.core.datafiles`). This module imports nothing heavy:
method modules import it at the top.
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


@dataclass(frozen=True)
class DataFile:
    """A data-file argument whose file is read by the shared line-numbered readers (:mod:`zoo.core.data`) before torch
    is imported, so a malformed user file fails as ``file:line: ...`` in the time the recipe check takes
    (:func:`zoo.core.datafiles.check_data_files`). Only a file whose name ends in the kind's suffixes is checked (a
    folder, an ``.npz`` or a shipped file under ``data/`` is left to the datamodule, which checks everything again).

    Args:
        kind: ``"csv"`` (``.csv``/``.csv.gz``: a header naming each column once, every row as long as the header,
            UTF-8 text) or ``"jsonl"`` (``.jsonl``/``.jsonl.gz``: one JSON object per non-blank line, UTF-8 text).
        columns: the columns (CSV) or keys (JSONL) every row needs.
        column_args: arguments of the same block whose values name further needed columns (``data.label``; a list
            value names one column per item; ``None`` names none).
        text: JSONL keys whose values must be strings.
    """

    kind: str
    columns: tuple[str, ...] = ()
    column_args: tuple[str, ...] = ()
    text: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in ("csv", "jsonl"):
            raise TypeError(f"DataFile: kind must be 'csv' or 'jsonl', got {self.kind!r}")

    def spec(self, describe=None) -> dict:
        return {
            "file": {
                "kind": self.kind,
                "columns": list(self.columns),
                "column_args": list(self.column_args),
                "text": list(self.text),
            }
        }


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
