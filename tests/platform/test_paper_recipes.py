"""Every paper recipe (``recipes/paper/*.yaml``) runs end to end through ``train.py`` on a CPU for a few steps with its
protocol and a same-family stand-in (``recipes/paper/tiny/<name>.yaml`` over ``zoo.models.stand_ins``), so a new
paper recipe is tested by adding its overlay, not by editing a table here. Runs that take more than ~10 s on the
shared 2-core machine are ``slow``; the overlay check and the fast runs stay in the default suite."""

import json
import math
import re
import time
from pathlib import Path

import pytest

from zoo.cli import compose_and_validate, main
from zoo.core.data import repo_root
from zoo.models import stand_ins

RECIPES = repo_root() / "recipes"
PAPER = sorted((RECIPES / "paper").glob("*.yaml"))
TINY = RECIPES / "paper" / "tiny"

#: paper recipes whose stand-in run took under ~10 s here (one thread, load ~2); every other one is ``slow``, so a
#: new recipe starts there
FAST = {"cond-dp-criteo.yaml", "desi-sim.yaml", "pulse-sae.yaml", "survshap-iq.yaml", "trsp.yaml"}

#: what every stand-in run sets: one CPU process (the sharded strategies run on 2 gloo processes in test_ddp.py and
#: tests/shapo/test_shapo_fsdp.py)
CPU = ["trainer.accelerator=cpu", "trainer.devices=1", "trainer.strategy=auto", "trainer.num_nodes=1"]


@pytest.fixture(scope="module")
def stand_in_root(tmp_path_factory):
    return tmp_path_factory.mktemp("stand-ins")


def _overlay(recipe: Path) -> Path:
    overlay = TINY / recipe.name
    assert overlay.is_file(), (
        f"recipes/paper/{recipe.name} has no stand-in: add recipes/paper/tiny/{recipe.name}, an overlay that shrinks "
        f"its protocol to a few steps and points its model directory and data files at "
        f"${{oc.env:{stand_ins.ENV}}}/KIND (kinds: {', '.join(sorted(stand_ins.BUILDERS))}; a new kind is a builder "
        f"in zoo/models/stand_ins.py)"
    )
    return overlay


@pytest.mark.parametrize("recipe", PAPER, ids=lambda p: p.name)
def test_every_paper_recipe_has_a_stand_in_overlay(recipe, monkeypatch, tmp_path):
    """Each paper recipe has an overlay naming only known stand-ins, and recipe + overlay validate (files unchecked:
    nothing is built here)."""
    overlay = _overlay(recipe)
    stand_ins.kinds(overlay)  # raises on an unknown kind
    monkeypatch.setenv(stand_ins.ENV, str(tmp_path))
    cfg = compose_and_validate(
        [f"recipe=paper/{recipe.name}", f"overlay=paper/tiny/{recipe.name}", *CPU], check_files=False
    )
    assert cfg["name"].endswith("-tiny"), "a stand-in run must not share runs/<name>/ with the real run"


def test_a_missing_stand_in_is_named(tmp_path):
    """The message a recipe without an overlay gets says which file to add."""
    with pytest.raises(AssertionError, match=r"add recipes/paper/tiny/new-method-x\.yaml"):
        _overlay(tmp_path / "new-method-x.yaml")


@pytest.mark.parametrize(
    "recipe",
    [pytest.param(p, marks=() if p.name in FAST else pytest.mark.slow) for p in PAPER],
    ids=lambda p: p.name,
)
def test_paper_recipe_runs_on_its_stand_in(recipe, stand_in_root, monkeypatch, tmp_path):
    overlay = _overlay(recipe)
    stand_ins.build(stand_in_root, stand_ins.kinds(overlay))
    monkeypatch.setenv(stand_ins.ENV, str(stand_in_root))
    start = time.perf_counter()
    argv = [f"recipe=paper/{recipe.name}", f"overlay=paper/tiny/{recipe.name}", f"out_dir={tmp_path}", *CPU]
    assert main(["train", *argv]) == 0
    seconds = time.perf_counter() - start
    (run,) = [p.parents[1] for p in tmp_path.glob("*/version_0/checkpoints/last.ckpt")]
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    assert metrics, f"{recipe.name}: the stand-in run logged no metric"
    bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
    assert not bad, f"{recipe.name}: non-finite metrics on the stand-in: {bad}"
    if recipe.name in FAST:
        assert seconds < 30, f"{recipe.name} took {seconds:.0f} s: mark it slow (remove it from FAST)"


HEADER = ("Hardware", "GPU-hours", "You supply")


def _header(recipe: Path) -> dict[str, str]:
    """The ``# Field: text`` entries of a recipe's leading comment (continuation lines start ``#   ``)."""
    fields, key = {}, None
    for line in recipe.read_text().splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"# ([\w-]+(?: [\w-]+)?): (.*)", line)
        if m and m.group(1) in HEADER:
            key, fields[m.group(1)] = m.group(1), m.group(2)
        elif key and line.startswith("#   "):
            fields[key] += " " + line[4:]
        else:
            key = None
    return fields


@pytest.mark.parametrize("recipe", PAPER, ids=lambda p: p.name)
def test_paper_recipe_header_states_hardware_hours_and_inputs(recipe):
    """Every paper recipe's header says the hardware it assumes (GPUs x memory, or CPU), its estimated GPU-hours and
    what the user supplies as exact ``k=v`` overrides (each a key of the recipe); one GPU is stated with a reason and
    more than one matches a multi-device strategy."""
    fields = _header(recipe)
    missing = [f for f in HEADER if f not in fields]
    assert not missing, f"recipes/paper/{recipe.name}: header lacks {missing} (lines '# Field: text')"
    hardware = fields["Hardware"]
    gpus = re.match(r"(\d+) x (\d+) GB GPUs?\b", hardware)
    assert gpus or hardware.startswith("CPU only"), f"{recipe.name}: Hardware names no 'N x M GB GPU': {hardware}"
    assert re.search(r"\d", fields["GPU-hours"]), f"{recipe.name}: GPU-hours gives no number"
    supply = fields["You supply"]
    tokens = [t.rstrip(",;") for t in supply.split() if re.match(r"[a-z_]+(\.\w+)*=\S", t)]
    assert tokens or supply.startswith("nothing"), f"{recipe.name}: You supply names no k=v and is not 'nothing'"
    cfg = compose_and_validate([f"recipe=paper/{recipe.name}", *tokens], check_files=False)  # unknown keys fail
    strategy, devices = cfg["trainer"].get("strategy"), cfg["trainer"].get("devices")
    if gpus and int(gpus.group(1)) > 1:
        assert strategy not in ("auto", None) and devices != 1, f"{recipe.name}: several GPUs but {strategy=}"
    elif gpus:  # one GPU: the reason in brackets (the model's size in memory, or why the method refuses more)
        assert re.search(r"\(.*\d.*\)", hardware), f"{recipe.name}: one GPU: say why one device suffices"
