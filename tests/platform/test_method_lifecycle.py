"""Every registered method runs the whole user lifecycle after the documented install (#14, "Done when"): in a tmp
directory, ``zoo info NAME``; a tiny ``train`` of the recipe its ``EXAMPLE`` fact names (``zoo/core/facts.py``: the
method package's ``__init__.py``) with its ``recipes/tiny/`` overlay; ``resume=auto`` of that run (step-counting
methods are extended by raising ``trainer.max_steps`` and must end at the new step, except those whose ``EXAMPLE``
says the extension is refused (cond-dp), which must refuse with those words; the others are finished runs and must
say there is nothing to train); ``zoo predict RUN_DIR ARGS`` with the ``EXAMPLE``'s arguments, and again with
``--json`` (its record must match the method's ``predict_schema``, with no table inside a string); ``zoo eval
RUN_DIR``; and ``zoo export RUN_DIR --formats F`` for every format the method declares, each file checked.

Nothing here names a method: a new one is picked up from the registry, and one without its facts fails naming the file
and the fact to add. The 21 methods took 131 s here (2 shared CPU cores, one test process, 2026-12-01; 567 s at load ~4 on
2026-12-02); part of the default run."""

import json
import logging
import re
from pathlib import Path

import lightning.pytorch  # noqa: F401  (imported here: its log handler binds the session's stderr, not one test's)
import pytest

from zoo.cli import compose_and_validate, main
from zoo.core.data import repo_root
from zoo.core.prediction import check
from zoo.core.registry import get_method, method_fact
from zoo.methods import METHODS

ROOT = repo_root()


def example(name: str) -> tuple[list[str], list[str]]:
    """``(train arguments, predict arguments)`` of method ``name``'s ``EXAMPLE`` fact: its recipe with the
    ``tiny/`` overlay beside it (``recipes/tiny/NAME.yaml`` for a shipped recipe), and the ``zoo predict`` arguments,
    a path under ``data/`` made absolute (the test runs in a tmp directory).

    Raises:
        FactError: the method's package declares no ``EXAMPLE`` (the message says what to add).
    """
    fact = method_fact(name, "EXAMPLE")
    assert {"recipe", "predict"} <= set(fact) <= {"recipe", "predict", "extend_refused"}, (
        f"{name}: EXAMPLE takes 'recipe', 'predict' and optionally 'extend_refused': {fact}"
    )
    recipe = Path(fact["recipe"])
    overlay = recipe.parent / "tiny" / recipe.name if recipe.is_absolute() else Path("tiny") / recipe.name
    train = [f"recipe={recipe}.yaml", f"overlay={overlay}.yaml"]
    return train, [str(ROOT / a) if a.startswith("data/") and (ROOT / a).exists() else a for a in fact["predict"]]


#: Where each export format lands under ``RUN_DIR/export/`` (README, "Export").
EXPORT_FILES = {"package": "package", "hf": "hf", "onnx": "model.onnx", "torch_export": "model.pt2"}


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
    check_lifecycle(name, tmp_path, capsys, caplog, monkeypatch)


def check_lifecycle(name, tmp_path, capsys, caplog, monkeypatch):
    """The whole lifecycle of method ``name`` (module docstring); also run on a throwaway method
    (``test_new_method.py``)."""
    train_recipe, args = example(name)
    recipe = train_recipe[0]
    monkeypatch.chdir(tmp_path)  # anything a command writes to the current directory stays in tmp
    # cmd_train's logging.basicConfig binds a handler to this test's captured stderr: drop it with the test
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    out = tmp_path / "runs"
    train_args = [*train_recipe, f"out_dir={out}"]

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
    max_steps = compose_and_validate(train_args)["trainer"].get("max_steps") or -1
    extend = [f"trainer.max_steps={step + 2}", "trainer.max_epochs=-1"] if max_steps > 0 else []
    if refused := method_fact(name, "EXAMPLE").get("extend_refused"):  # the plan the run was calibrated for
        assert main(["train", *train_args, "export.formats=[]", "resume=auto", *extend]) == 2
        assert refused in capsys.readouterr().err and _global_step(run_dir) == step
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

    # 4. predict with the method's example input
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
