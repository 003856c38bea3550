"""The ``threads`` recipe key: default 1 from _defaults.yaml, checked like any key, applied before the model is built."""

import pytest
import torch

from zoo.cli import main
from zoo.core.recipe import load_recipe, validate
from zoo.core.schema import RecipeError

RECIPE = "tests/platform/recipes/digits.yaml"


def test_threads_defaults_to_one_and_bad_values_fail_named():
    assert load_recipe(RECIPE)["threads"] == 1
    for bad in ("threads=0", "threads=two", "threads=true"):
        with pytest.raises(RecipeError, match="threads"):
            validate(load_recipe(RECIPE, [bad]))
    validate(load_recipe(RECIPE, ["threads=null"]))


def test_train_sets_torch_threads_before_building(tmp_path, monkeypatch):
    seen = []
    import zoo.core.training as training

    real = training.build_module
    monkeypatch.setattr(training, "build_module", lambda cfg: seen.append(torch.get_num_threads()) or real(cfg))
    before = torch.get_num_threads()
    try:
        assert (
            main(
                [
                    "train",
                    f"recipe={RECIPE}",
                    f"out_dir={tmp_path}",
                    "trainer.max_steps=1",
                    "logger.kind=none",
                    "export.formats=[]",
                    "threads=2",
                ]
            )
            == 0
        )
        assert seen == [2]
    finally:
        torch.set_num_threads(before)
