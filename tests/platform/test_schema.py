"""The torch-free recipe tables (zoo/core/schemas/) match the code they are generated from; a drift fails here with
the command that regenerates them."""

import json

import pytest

from zoo.core import schema
from zoo.core.registry import method_extra, missing_requirements
from zoo.methods import METHODS

REGENERATE = "regenerate with `python -m zoo.core.schema --write`"


def test_trainer_table_matches_the_installed_lightning():
    stored = json.loads(schema.TRAINER_FILE.read_text())
    assert stored == json.loads(json.dumps(schema.generate_trainer())), f"lightning.Trainer changed: {REGENERATE}"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_table_exists_and_matches_its_classes(name):
    assert schema.method_schema(name) is not None, f"no zoo/core/schemas/{name}.json: {REGENERATE}"
    extra = method_extra(name)
    if extra and missing_requirements(extra):
        pytest.skip(f"{name} needs the {extra} extra")
    live = json.loads(json.dumps(schema.generate_method(name)))
    assert schema.method_schema(name) == live, f"{name}'s constructor arguments changed: {REGENERATE}"


@pytest.mark.parametrize(
    "value,spec,ok",
    [
        (3, {"types": ["int", "null"]}, True),
        (None, {"types": ["int", "null"]}, True),
        ("3", {"types": ["int"]}, False),
        (True, {"types": ["int"]}, False),
        (2, {"types": ["float"]}, True),
        (2.5, {"types": ["int"]}, False),
        ("bf16-mixed", {"choices": ["bf16-mixed"], "types": ["null"]}, True),
        (33, {"choices": [32]}, False),
        ([1, 2], {"types": ["list"]}, True),
        ({"a": 1}, {}, True),
        (True, {"choices": [1]}, False),
    ],
)
def test_fits_by_hand(value, spec, ok):
    assert schema.fits(value, spec) is ok


def test_render_names_accepted_types_and_values():
    assert schema.render({"types": ["int", "null"]}) == "int or null"
    assert schema.render({"types": ["null"], "choices": ["32-true", 16]}) == "null or one of '32-true', 16"
