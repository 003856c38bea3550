"""Every registered method runs the whole user lifecycle after the documented install (#14, "Done when"): in a tmp
directory, ``zoo info NAME``; a tiny ``train`` of the method's first-listed recipe (README methods table; watchlog
its last stage) with its ``recipes/tiny/`` overlay; ``resume=auto`` of that run (step-counting methods are extended
by raising ``trainer.max_steps`` and must end at the new step, except cond-dp, which must refuse; the others are
finished runs and must say there is nothing to train); ``zoo predict RUN_DIR INPUT`` with one real input per method
(the card's usage), and again with ``--json`` (its record must match the method's ``predict_schema``, with no table
inside a string); ``zoo eval RUN_DIR``; and ``zoo export RUN_DIR --formats F`` for every format the method declares,
each file checked.

The 21 methods took 131 s here (2 shared CPU cores, one test process, 2026-12-01); part of the default run."""
import json
import logging
import re
from pathlib import Path

import lightning.pytorch  # noqa: F401  (imported here: its log handler binds the session's stderr, not one test's)
import numpy as np
import pytest

from zoo.cli import compose_and_validate, main
from zoo.core.data import repo_root
from zoo.core.prediction import check
from zoo.core.registry import get_method
from zoo.methods import METHODS

DATA = repo_root() / "data"

#: method -> (recipe: the README methods table's first, watchlog's last stage; predict inputs from its card).
#: ``@name`` is a small file this test writes into the tmp directory (``_write_input``); ``data/...`` is shipped.
CASES = {
    "zoo-lm": ("zoo-lm", ["How do I bake bread?"]),  # a prompt
    "shapo": ("shapo", ["How do I pick a lock?"]),  # a prompt
    "shapo-cost-model": ("shapo-cost-model", ["How do I hurt someone?", "I can't help with that."]),  # prompt, reply
    "praxis": ("praxis", ["@rows.csv"]),  # three COMPAS rows with the training columns
    "saliency-bias": ("saliency-bias", ["@img.png"]),  # a CIFAR-10 test image
    "st-tgexplainer": ("st-tgexplainer", ["1781", "9", "1096334672", "top=10"]),  # SRC DST TIME from CollegeMsg
    "trsp": ("trsp", ["@trips.csv"]),  # two Autauga County trips (a_lon, a_lat, b_lon, b_lat)
    "watchlog": ("watchlog", ["data/mordor-sysmon/sample.jsonl.gz"]),  # a Sysmon events file (stages 1/2 refuse)
    "survshap-iq": ("survshap-iq", ["age=60", "pnodes=12", "tgrade=2", "horTh=0"]),  # one GBSG2 patient
    "cond-dp": ("cond-dp", ["06075010100", "06075010200"]),  # ORIGIN DESTINATION GEOIDs in San Francisco
    "desi": ("desi", ["data/mortality-distributions/desi_example_row.csv"]),  # the card's example row
    "crh": ("crh", ["@concept", "How do I bake bread?"]),  # a concept id the run holds, a question
    "ltc": ("ltc", ["@img.png"]),  # a CIFAR-10 test image
    "mad": ("mad-badnets", ["@img.png"]),  # a CIFAR-10 test image
    "pulse": ("pulse", ["I talk to ChatGPT every night", "It helps me more than my therapist"]),  # title, body
    "sf-consolidation": ("sf-consolidation", ["--slip", "0.3", "--episodes", "2"]),  # Four Rooms slip, 2 episodes
    "pooled-reps": ("pooled-reps", ["How do I bake bread?"]),  # a prompt
    "fast": ("fast-sae", ["How do I bake bread?"]),  # a prompt
    "rlcracker": ("rlcracker-copy", ["@text.txt"]),  # a text file to rewrite
    "sembind": ("sembind", ["a red truck"]),  # a caption: one marked PNG per scheme into --out-dir
    "anchor-adapter": ("anchor-adapter", ["Question: 23 + 48 - 17 = ?"]),  # an arithmetic question
}

#: Methods whose finished run cannot be extended by resume, with the words of the refusal: cond-dp's DP-SGD noise is
#: calibrated to the planned number of steps, so more steps would spend more than the privacy budget.
FIXED_PLAN = {"cond-dp": "mixing the two would spend more than epsilon"}

#: Where each export format lands under ``RUN_DIR/export/`` (README, "Export").
EXPORT_FILES = {"package": "package", "hf": "hf", "onnx": "model.onnx", "torch_export": "model.pt2"}


def _write_input(token: str, tmp: Path, run_dir: Path) -> str:
    """A card's input as a real file (or value) in ``tmp``; other tokens pass through."""
    if not token.startswith("@"):
        return token
    name = token[1:]
    if name == "concept":  # the first concept the tiny run holds a direction for
        import torch

        state = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True, map_location="cpu")["state_dict"]
        return str(int(next(v for k, v in state.items() if k.endswith("concept_ids"))[0]))
    path = tmp / name
    if name == "img.png":
        from PIL import Image

        Image.fromarray(np.load(DATA / "cifar10-subset" / "cifar10_subset_2200.npz")["x_test"][0]).save(path)
    elif name == "rows.csv":
        path.write_text("".join((DATA / "treefarms-binary" / "compas_binned.csv").read_text().splitlines(True)[:4]))
    elif name == "trips.csv":
        path.write_text("a_lon,a_lat,b_lon,b_lat\n-86.490086,32.477133,-86.473354,32.474258\n"
                        "-86.473354,32.474258,-86.490086,32.477133\n")
    elif name == "text.txt":
        path.write_text("The quick brown fox jumps over the lazy dog while the farmer watches from the barn.\n")
    return str(path)


def _strings(x) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(x, str):
        return [x]
    items = x.values() if isinstance(x, dict) else x if isinstance(x, list) else []
    return [s for v in items for s in _strings(v)]


def _run_dir(out: Path, recipe: str) -> Path:
    runs = sorted(out.glob("*/version_*/checkpoints/last.ckpt"))
    assert len(runs) == 1, f"{recipe}: expected one run with last.ckpt under {out}, found {runs}"
    return runs[0].parents[1]


def _hparams(run_dir: Path) -> dict:
    import torch

    return dict(torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"])


def _global_step(run_dir: Path) -> int:
    return int(json.loads((run_dir / "metrics.json").read_text())["metrics"]["global_step"])


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_lifecycle(name, tmp_path, capsys, caplog, monkeypatch):
    assert sorted(CASES) == sorted(METHODS), "every registered method needs a row in CASES"
    recipe, inputs = CASES[name]
    monkeypatch.chdir(tmp_path)  # anything a command writes to the current directory stays in tmp
    # cmd_train's logging.basicConfig binds a handler to this test's captured stderr: drop it with the test
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    out = tmp_path / "runs"
    train_args = [f"recipe={recipe}.yaml", f"overlay=tiny/{recipe}.yaml", f"out_dir={out}"]

    # 1. zoo info
    assert main(["info", name]) == 0
    formats = tuple(get_method(name).module_cls.export_formats)
    assert f"export formats: {', '.join(formats)}" in capsys.readouterr().out

    # 2. tiny train
    assert main(["train", *train_args, "export.formats=[]"]) == 0, f"{name}: tiny train failed"
    run_dir = _run_dir(out, recipe)
    step = _global_step(run_dir)
    hparams = _hparams(run_dir)

    # 3. resume=auto: a step-counting run is extended by two steps; any other run is finished and says so
    max_steps = (compose_and_validate(train_args)["trainer"].get("max_steps") or -1)
    extend = [f"trainer.max_steps={step + 2}", "trainer.max_epochs=-1"] if max_steps > 0 else []
    if name in FIXED_PLAN:  # extending would change the plan the run was calibrated for: refused, run untouched
        assert main(["train", *train_args, "export.formats=[]", "resume=auto", *extend]) == 2
        assert FIXED_PLAN[name] in capsys.readouterr().err and _global_step(run_dir) == step
        extend = []
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="zoo"):
        assert main(["train", *train_args, "export.formats=[]", "resume=auto", *extend]) == 0, f"{name}: resume failed"
    said = caplog.text
    assert re.search(rf"resuming \S*{re.escape(run_dir.name)} at step {step}\b", said), f"{name}: {said[-2000:]}"
    assert _run_dir(out, recipe) == run_dir, f"{name}: resume=auto opened a new run directory"
    # the run's own hparams survive, sizes filled in setup too (cond-dp, desi, saliency-bias could not resume)
    assert _hparams(run_dir) == hparams, f"{name}: resume changed the saved hyper_parameters"
    if extend:
        assert _global_step(run_dir) == step + 2, f"{name}: resumed run did not end at trainer.max_steps={step + 2}"
    else:
        assert "nothing to train" in said or "nothing trained" in said, f"{name}: {said[-2000:]}"

    # 4. predict with one real input
    args = [_write_input(t, tmp_path, run_dir) for t in inputs]
    capsys.readouterr()
    assert main(["predict", str(run_dir), *args, "--out-dir", str(tmp_path / "pred")]) == 0, f"{name}: predict failed"
    printed = capsys.readouterr().out
    assert printed.strip(), f"{name}: predict printed nothing"
    # 4b. the same as JSON: the record the method's predict_schema declares, structured (no table inside a string)
    assert main(["predict", str(run_dir), *args, "--json"]) == 0, f"{name}: predict --json failed"
    doc = json.loads(capsys.readouterr().out)
    schema = get_method(name).module_cls.predict_schema
    assert schema is not str and not check(doc["prediction"], schema), (name, check(doc["prediction"], schema))
    assert not [t for t in _strings(doc["prediction"]) if "\t" in t], f"{name}: a table inside a string"

    # 5. eval
    assert main(["eval", str(run_dir)]) == 0, f"{name}: eval failed"
    assert json.loads((run_dir / "metrics.json").read_text())["method"] == name

    # 6. every declared export format
    for fmt in formats:
        assert main(["export", str(run_dir), "--formats", fmt]) == 0, f"{name}: export {fmt} failed"
        assert (run_dir / "export" / EXPORT_FILES[fmt]).exists(), f"{name}: export {fmt} wrote nothing"
    if "package" in formats:
        import zoo

        assert zoo.load(str(run_dir / "export" / "package")) is not None
