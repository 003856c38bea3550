"""The override grammar as a table: k=v sets, +k=v adds, ~k deletes; typos fail with a did-you-mean."""

import pytest

from zoo.core.recipe import RecipeError, apply_override

BASE = {"model": {"lr": 0.1, "hidden": 32, "opt": {"name": "adamw"}}, "seed": 0, "data": {"path": "x"}}

CASES = [
    # token, expected value at path (or exception substring)
    ("model.lr=1e-4", ("model.lr", 1e-4)),
    ("model.hidden=64", ("model.hidden", 64)),
    ("model.opt.name=sgd", ("model.opt.name", "sgd")),
    ("seed=3", ("seed", 3)),
    ("model.lr=null", ("model.lr", None)),
    ("data.path='a b.jsonl'", ("data.path", "a b.jsonl")),
    ("+model.dropout=0.5", ("model.dropout", 0.5)),
    ("+model.new.deep=[1,2]", ("model.new.deep", [1, 2])),
    ("+model.lr=0.3", ("model.lr", 0.3)),
    ("model.opt={name: sgd, momentum: 0.9}", ("model.opt", {"name": "sgd", "momentum": 0.9})),
    ("~model.hidden", ("model.hidden", KeyError)),
    ("data.path=06075", ("data.path", "06075")),  # a FIPS code: digits with a leading zero stay a string, not octal
    ("seed=0", ("seed", 0)),
    ("seed=-0", ("seed", 0)),
    ("model.lrr=1", "model.lrr: no such key (did you mean 'model.lr'?)"),
    ("modle.lr=1", "modle: no such key"),
    ("~model.nope", "model.nope: no such key"),
    ("model.lr", "expected key=value"),
    ("~model.lr=1", "delete takes no value"),
    ("=3", "empty key"),
    ("model..lr=3", "empty key"),
    ("seed.x=1", "seed: is 0, not a mapping"),
    ("model.lr=[1,", "cannot parse value"),
]


def _get(cfg, path):
    for p in path.split("."):
        cfg = cfg[p]
    return cfg


@pytest.mark.parametrize("token,want", CASES, ids=[c[0] for c in CASES])
def test_override_grammar(token, want):
    import copy

    cfg = copy.deepcopy(BASE)
    if isinstance(want, str):
        with pytest.raises(RecipeError, match=None) as e:
            apply_override(cfg, token)
        assert want in str(e.value)
        return
    apply_override(cfg, token)
    path, value = want
    if value is KeyError:
        with pytest.raises(KeyError):
            _get(cfg, path)
    else:
        got = _get(cfg, path)
        assert got == value and type(got) is type(value)


def test_zoo_config_prints_the_resolved_recipe_as_valid_yaml(capsys):
    import yaml

    from zoo.cli import main

    assert main(["config", "recipe=praxis.yaml", "seed=7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# resolved from recipes/praxis.yaml\n")
    cfg = yaml.safe_load(out)
    assert cfg["seed"] == 7 and cfg["method"] == "praxis" and "_recipe" not in cfg


def test_a_fips_county_on_the_command_line_stays_a_string():
    """``data.county=06075`` (San Francisco) is the county, not the octal number 3133 refused as a wrong type."""
    from zoo.cli import compose_and_validate

    cfg = compose_and_validate(["recipe=trsp.yaml", "data.county=06075"], check_files=False)
    assert cfg["data"]["county"] == "06075"


def test_overrides_between_round_trips_through_the_grammar():
    """The tokens a release's card prints turn the recipe back into the run's resolved recipe when applied."""
    import copy
    import shlex

    from zoo.core.reproduce import overrides_between

    run = copy.deepcopy(BASE)
    run["model"]["lr"] = 1e-3
    run["model"]["opt"] = {"name": "adamw", "betas": [0.9, 0.95]}  # a key the recipe lacks
    del run["model"]["hidden"]
    run["data"]["path"] = "123"  # a string that YAML would read as a number
    run["data"]["tokens"] = "a b: c"  # needs quoting
    run |= {"name": "other-run", "out_dir": "/tmp/x", "_recipe": "recipes/x.yaml"}  # where it ran: never tokens
    tokens = overrides_between(BASE, run)
    assert sorted(tokens) == sorted(
        ["model.lr=0.001", "+model.opt.betas=[0.9, 0.95]", 'data.path="123"', '+data.tokens="a b: c"', "~model.hidden"]
    )
    rebuilt = copy.deepcopy(BASE)
    for token in shlex.split(" ".join(map(shlex.quote, tokens))):  # as a shell hands them to train.py
        apply_override(rebuilt, token)
    assert rebuilt == {k: v for k, v in run.items() if k not in ("name", "out_dir", "_recipe")}


def test_reproduce_command_names_a_shipped_recipe_and_only_what_changed():
    from zoo.core.recipe import load_recipe
    from zoo.core.reproduce import reproduce_command

    run = load_recipe("zoo-lm.yaml", ["seed=3", "trainer.max_epochs=2", "out_dir=/tmp/elsewhere"])
    assert reproduce_command(run) == "python train.py recipe=zoo-lm.yaml seed=3 trainer.max_epochs=2"
    assert reproduce_command(load_recipe("zoo-lm.yaml")) == "python train.py recipe=zoo-lm.yaml"
    # a saved checkpoint spells out constructor defaults the recipe leaves unset: those are not overrides
    run["model"] |= {"dropout_extra": 0.0, "width_extra": 8}
    assert reproduce_command(run, {"model.dropout_extra": 0.0}) == (
        "python train.py recipe=zoo-lm.yaml seed=3 trainer.max_epochs=2 +model.width_extra=8"
    )
