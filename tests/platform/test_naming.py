"""Runs named for what they are: name= needs no '+', and a run on the user's data.path is named after that file and
records it (name, sha256, rows) in config.yaml, the model card and the manifest entry, never the shipped set."""

import hashlib
from pathlib import Path

import pytest
import yaml

from zoo.cli import compose_and_validate, main

SHIPPED = "data/temporal-graphs/bitcoin_otc.csv"


def _my_csv(tmp_path, rows=300):
    lines = Path(SHIPPED).read_text().splitlines()
    path = tmp_path / "my-graph.csv"
    path.write_text("\n".join(lines[: rows + 1]) + "\n")  # header + rows
    return path


def test_name_is_set_without_plus():
    assert compose_and_validate(["recipe=praxis.yaml", "name=mine"], check_files=False)["name"] == "mine"


def test_user_data_names_the_run_and_the_card(tmp_path):
    mine = _my_csv(tmp_path)
    cfg = compose_and_validate(["recipe=st-tgexplainer-bitcoin-otc.yaml", f"data.path={mine}"])
    assert cfg["name"] == "st-tgexplainer-my-graph"
    entry = cfg["card"]["data"][0]
    assert entry == {
        "file": "my-graph.csv",
        "sha256": hashlib.sha256(mine.read_bytes()).hexdigest(),
        "rows": 300,
        "key": "data.path",
        "path": str(mine),
    }
    assert "bitcoin" not in yaml.safe_dump(cfg["card"]["data"]).lower()
    # an explicit name wins; the shipped data keep the recipe's name and card
    assert (
        compose_and_validate(["recipe=st-tgexplainer-bitcoin-otc.yaml", f"data.path={mine}", "name=x"])["name"] == "x"
    )
    shipped = compose_and_validate(["recipe=st-tgexplainer-bitcoin-otc.yaml"])
    assert shipped["name"] == "st-tgexplainer-bitcoin-otc" and shipped["card"]["data"] != cfg["card"]["data"]


@pytest.mark.slow
def test_user_data_reaches_config_card_and_manifest(tmp_path, zoo_home):
    mine = _my_csv(tmp_path)
    assert (
        main(
            [
                "train",
                "recipe=st-tgexplainer-bitcoin-otc.yaml",
                "overlay=tiny/st-tgexplainer.yaml",
                f"data.path={mine}",
                f"out_dir={tmp_path / 'runs'}",
                "export.formats=[package]",
            ]
        )
        == 0
    )
    run = tmp_path / "runs" / "st-tgexplainer-my-graph-tiny" / "version_0"
    assert yaml.safe_load((run / "config.yaml").read_text())["card"]["data"][0]["file"] == "my-graph.csv"
    card = (run / "export" / "package" / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])  # the card's front matter: licence, data, metrics (and the recipe)
    assert front["data"][0]["file"] == "my-graph.csv"
    assert "bitcoin" not in yaml.safe_dump([front["data"], front["license"]]).lower()
    assert main(["release", str(run), "--id", "st-tgexplainer.mine", "--which", "last"]) == 0
    from zoo.core.hub import read_manifest

    data = read_manifest()["st-tgexplainer.mine"]["data"]
    assert data[0]["file"] == "my-graph.csv" and data[0]["rows"] == 300


def test_every_recipe_is_named_for_its_method():
    """A recipe's file name (and so its run name) starts with the registered method it trains (issue 43): a user
    browsing recipes/ or runs/ sees whose it is; ``dpo.yaml`` is ``shapo-dpo.yaml``. Iterates the registry."""
    from zoo.methods import METHODS

    recipes = [p for p in sorted(Path("recipes").rglob("*.yaml")) if not p.name.startswith("_")]
    assert len(recipes) > len(METHODS)
    unprefixed = [str(p) for p in recipes if not any(p.stem == m or p.stem.startswith(f"{m}-") for m in METHODS)]
    assert not unprefixed, f"name these for their method ({', '.join(sorted(METHODS))}): {unprefixed}"
