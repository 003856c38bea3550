"""Structured predictions: what ``zoo predict --json`` returns, the schema a method declares for it, and the text
``zoo predict`` prints from the same records.

A method's ``predict_json`` returns a dict; its class attribute ``predict_schema`` says what that dict holds, in a
small notation checked by :func:`check`: a type (``float`` accepts an int too), ``None``, a dict of required keys,
``{str: schema}`` (a mapping of any string keys), a one-item list (every item matches it), or a tuple of
alternatives (``(str, None)``). Tables are lists of row dicts, never TSV text.
"""

from __future__ import annotations

from typing import Any


def check(obj: Any, schema: Any, where: str = "$") -> list[str]:
    """Where ``obj`` does not match ``schema`` (empty when it does): ``["$.rows[0].score: expected float, got str"]``.
    Keys ``obj`` has beyond the schema's are allowed (a method may add detail)."""
    if isinstance(schema, dict):
        if not isinstance(obj, dict):
            return [f"{where}: expected an object, got {type(obj).__name__}"]
        if list(schema) == [str]:  # a mapping: any string key, every value matching
            return [
                e for k, v in obj.items() for e in check(k, str, f"{where} key") + check(v, schema[str], f"{where}.{k}")
            ]
        errs = [f"{where}.{k}: missing" for k in schema if k not in obj]
        return errs + [e for k, s in schema.items() if k in obj for e in check(obj[k], s, f"{where}.{k}")]
    if isinstance(schema, list):
        if not isinstance(obj, list):
            return [f"{where}: expected a list, got {type(obj).__name__}"]
        return [e for i, x in enumerate(obj) for e in check(x, schema[0], f"{where}[{i}]")]
    if isinstance(schema, tuple):  # alternatives: the first that matches wins
        errs = [check(obj, alt, where) for alt in schema]
        return (
            []
            if any(not e for e in errs)
            else [f"{where}: matches none of its alternatives: " + "; ".join(e[0] for e in errs)]
        )
    if schema is None:
        return [] if obj is None else [f"{where}: expected null, got {type(obj).__name__}"]
    types = (schema, int) if schema is float else (schema,)
    if isinstance(obj, bool) and schema is not bool or not isinstance(obj, types):
        return [f"{where}: expected {schema.__name__}, got {type(obj).__name__}"]
    return []


def tsv(rows: list[dict], columns: list[str] | None = None, digits: int = 4) -> str:
    """``rows`` as tab-separated text under a header (``columns``, default the first row's keys); floats with
    ``digits`` decimals."""
    columns = columns or (list(rows[0]) if rows else [])

    def cell(v) -> str:
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    return "\n".join(["\t".join(columns), *("\t".join(cell(r.get(c, "")) for c in columns) for r in rows)])
