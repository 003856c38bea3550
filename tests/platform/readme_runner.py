"""Run the shell and Python blocks of a markdown file as a new user would, at tiny scale, in a scratch directory.

Each command of a ```` ```bash ```` block (``&&`` chains split, ``# comments`` dropped) is classified:

- ``python train.py ...`` / ``zoo train ...``: run with the recipe's ``recipes/tiny/`` overlay (the README's
  commands at test scale); a GPU or paper-scale recipe (``paper/``, ``accelerator=gpu``) is composed and validated
  with ``zoo config`` instead, since it cannot run here.
- other ``zoo`` commands (``config``, ``list``, ``info``, ``base``, ``predict``, ``eval``, ``export``, ``release``): run.
  ``release`` writes into a scratch copy of ``checkpoints/`` (``$ZOO_CHECKPOINTS``), never the repository's.
- ``python -m zoo...experiments ...`` and ``python benchmarks/*.py``: too long for a test; checked by importing the
  module and running its ``--help``.
- ``torchrun ... train.py ARGS`` (a multi-node launch): ``ARGS`` composed and validated with ``zoo config``;
  ``export VAR=...``: checked.
- ``pip install``, ``python -m pytest``, ``wandb sync``: checked, not executed (the install is what CI itself does;
  the suite is this test's own; syncing needs the network).

```` ```python ```` blocks are executed in one interpreter per block. Everything runs in-process through
``zoo.cli.main`` from the scratch directory, so ``runs/`` made by one command is there for the next.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zoo.cli import main
from zoo.core.data import repo_root

ROOT = repo_root()
CHECKED_ONLY = (
    ("pip", "install"),
    ("python", "-m", "pytest"),
    ("wandb", "sync"),
    ("ruff", "check"),
    ("ruff", "format"),
)


@dataclass
class Outcome:
    command: str
    how: str  # "ran" | "composed" | "help" | "checked"
    code: int
    output: str = field(repr=False, default="")


def blocks(path: Path, langs=("bash", "sh", "python")) -> list[tuple[str, str, int]]:
    """``(language, text, first line number)`` of the fenced code blocks of a markdown file; an untagged block whose
    every line is a ``python ...`` / ``zoo ...`` command (or a comment) counts as ``bash``."""
    out, lang, buf, start = [], None, [], 0
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            if lang is None:
                lang, buf, start = line[3:].strip() or "text", [], i + 1
            else:
                lines = [x.strip() for x in buf if x.strip() and not x.strip().startswith("#")]
                if lang == "text" and lines and all(x.startswith(("python ", "zoo ")) for x in lines):
                    lang = "bash"
                if lang in langs:
                    out.append((lang, "\n".join(buf), start))
                lang = None
            continue
        if lang is not None:
            buf.append(line)
    return out


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell block: comments dropped, backslash-continued lines joined, ``&&`` chains split,
    tokenised with shlex."""
    out = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens = shlex.split(line, comments=True)
        cmd: list[str] = []
        for tok in [*tokens, "&&"]:
            if tok == "&&":
                if cmd:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(tok)
    return out


def _zoo(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        code = main(argv)
    return code, buf.getvalue()


def _recipe_arg(args: list[str]) -> str | None:
    return next((a.split("=", 1)[1] for a in args if a.startswith("recipe=")), None)


def run_command(cmd: list[str], tiny: bool = True) -> Outcome:
    """Run (or check) one README command from the current directory (``tiny=False``: recipes as written)."""
    text = shlex.join(cmd)
    if any(tuple(cmd[: len(c)]) == c for c in CHECKED_ONLY):
        return Outcome(text, "checked", 0)
    if cmd[:2] == ["python", "train.py"] or cmd[:2] == ["zoo", "train"]:
        args = cmd[2:]
        recipe = _recipe_arg(args) or ""
        if recipe.startswith("paper/") or "trainer.accelerator=gpu" in args:
            return Outcome(text, "composed", *_zoo(["config", *args]))
        return Outcome(text, "ran", *_zoo(["train", *args, *(_tiny_overlay(recipe, args) if tiny else [])]))
    if cmd[0] == "zoo":
        return Outcome(text, "ran", *_zoo(cmd[1:]))
    if cmd[0] == "export" and all("=" in a for a in cmd[1:]):
        return Outcome(text, "checked", 0)  # the environment of the launcher commands that follow
    if cmd[0] == "torchrun" and "train.py" in cmd:  # a multi-node launch: its train.py arguments are composed
        return Outcome(text, "composed", *_zoo(["config", *cmd[cmd.index("train.py") + 1 :]]))
    if cmd[:2] == ["python", "-m"] and cmd[2].startswith("zoo."):
        if cmd[2] == "zoo.cli":
            return Outcome(text, "ran", *_zoo(cmd[3:]))
        return _help(text, [sys.executable, "-m", cmd[2], "--help"])
    if cmd[0] == "python" and cmd[1].startswith("benchmarks/"):
        return _help(text, [sys.executable, str(ROOT / cmd[1]), "--help"])
    raise AssertionError(f"the README runner does not know how to run {text!r}: teach tests/platform/readme_runner.py")


def _tiny_overlay(recipe: str, args: list[str]) -> list[str]:
    """``overlay=`` for the recipe's tiny overlay, and ``name=`` the command's run name as written (a tiny overlay
    would add ``-tiny``; the README's later commands name ``runs/<name>/version_N``). With ``init_from`` the overlay's
    ``model`` block is left out (the weights fix the model, and a tiny architecture would not fit them), and so are
    the ``data`` keys it shares with that block, written to a scratch file."""
    import yaml

    from zoo.cli import _split_train_args
    from zoo.core.recipe import load_recipe

    overlay = ROOT / "recipes" / "tiny" / Path(recipe).name
    if not overlay.is_file() or recipe.startswith("tiny/"):
        return []
    recipe, overlays, overrides = _split_train_args(args)
    named = any(a.lstrip("+").startswith("name=") for a in overrides)
    name = [] if named else [f"name={load_recipe(recipe, overrides, overlays)['name']}"]
    if not any(a.startswith("init_from=") for a in args):
        return [f"overlay=tiny/{overlay.name}", *name]
    top = yaml.safe_load(overlay.read_text()) or {}
    model = top.pop("model", None) or {}
    for key in set(model) & set(top.get("data") or {}):  # sizes the data share with the model (K neighbours)
        del top["data"][key]
    scratch = Path(f"tiny-overlay-{overlay.name}").resolve()
    scratch.write_text(yaml.safe_dump(top))
    return [f"overlay={scratch}", *name]


def _help(text: str, argv: list[str]) -> Outcome:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    return Outcome(text, "help", out.returncode, out.stdout + out.stderr)


def run_python(code: str) -> Outcome:
    """Execute a Python block; a raised exception is a failure with its message as output."""
    buf = io.StringIO()
    path = Path("readme_block.py")
    path.write_text(code)
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(str(path), run_name="__main__")
    except Exception as e:  # noqa: BLE001  (any error of the block is the README's failure)
        return Outcome(code, "ran", 1, f"{buf.getvalue()}{type(e).__name__}: {e}")
    return Outcome(code, "ran", 0, buf.getvalue())


def scratch_checkpoints(tmp: Path) -> Path:
    """A scratch ``checkpoints/``: the shipped packages linked, the manifest copied (``zoo release`` may write)."""
    src = ROOT / "checkpoints"
    dst = tmp / "checkpoints"
    dst.mkdir()
    for p in src.iterdir():
        if p.name == "manifest.yaml":
            (dst / p.name).write_text(p.read_text())
        else:
            (dst / p.name).symlink_to(p, target_is_directory=p.is_dir())
    return dst


def own_data(tmp: Path, lines: int = 40) -> None:
    """The users' files the README and the cards name, cut from shipped real data: ``my_chats.jsonl`` /
    ``my_val.jsonl`` (zoo-lm chats), ``mine.jsonl`` (pooled-reps: Alpaca prompt + reference), ``my.csv``
    (survshap-iq: GBSG2 with the time in ``months`` and the event in ``died``), ``mine.csv`` (cond-dp: scikit-learn's
    diabetes data, label ``y``), ``trips.csv`` (trsp: Manhattan commutes between tract centroids),
    ``my_events.jsonl`` / ``my_labels.csv`` (watchlog: the shipped Sysmon sample, its labels moved to the CSV)."""
    import csv
    import gzip
    import json

    chats = (ROOT / "data" / "zoo-lm-chat" / "train.jsonl").read_text().splitlines()
    (tmp / "my_chats.jsonl").write_text("\n".join(chats[:lines]) + "\n")
    (tmp / "my_val.jsonl").write_text("\n".join(chats[lines : lines + 10]) + "\n")
    alpaca = json.loads((ROOT / "data" / "alpaca-subset" / "alpaca_5000.json").read_text())[:lines]
    (tmp / "mine.jsonl").write_text(
        "".join(json.dumps({"prompt": r["instruction"], "reference": r["output"]}) + "\n" for r in alpaca)
    )
    from zoo.methods.survshap_iq.datamodule import load_shipped

    X, time, event, names = load_shipped("gbsg2")
    with open(tmp / "my.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*names, "months", "died"])
        w.writerows([*map(float, x), round(t / 30.44, 2), int(e)] for x, t, e in zip(X, time, event))
    od = ROOT / "data" / "commuting-od"
    with open(od / "36061_regions.csv", newline="") as f:
        where = {r["geoid"]: (r["centroid_lon"], r["centroid_lat"]) for r in csv.DictReader(f)}
    with open(od / "36061_od.csv", newline="") as f:
        trips = [
            (r["origin_geoid"], r["destination_geoid"])
            for r in csv.DictReader(f)
            if r["origin_geoid"] != r["destination_geoid"] and r["destination_geoid"] in where
        ][:10]
    from sklearn.datasets import load_diabetes

    d = load_diabetes()  # cond-dp: a label in a declared range (disease progression / 35, inside [0, 10])
    with open(tmp / "mine.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*d.feature_names, "y"])
        w.writerows([*map(float, x), round(float(t) / 35, 4)] for x, t in zip(d.data, d.target))
    with gzip.open(ROOT / "data" / "mordor-sysmon" / "sample.jsonl.gz", "rt") as f:
        events = [json.loads(line) for line in f]
    labels = "".join(f"{i},{e.pop('label')}\n" for i, e in enumerate(events, 1))
    (tmp / "my_labels.csv").write_text("line,label\n" + labels)
    (tmp / "my_events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp / "trips.csv").write_text(
        "a_lon,a_lat,b_lon,b_lat\n" + "".join(f"{','.join(where[a])},{','.join(where[b])}\n" for a, b in trips)
    )


def quoted(path: Path) -> list[str]:
    """Backticked spans of a markdown file's prose (outside code blocks)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return re.findall(r"`([^`\n]+)`", text)
