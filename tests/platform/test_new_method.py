"""Adding a method touches its own folder, its recipes and pyproject's extra, nothing else (#43 "Done when").

In a scratch copy of the repository (every tracked folder and top-level file copied but
``data/``, ``checkpoints/`` and ``results/``, which are linked), the template method of docs/adding-a-method.md is written where
its ``<!-- template: PATH -->`` markers say (``zoo/methods/throwaway/*``, ``recipes/{,tiny/}throwaway.yaml``), the two
generators run (``python -m zoo.core.schema --write throwaway``, ``python -m zoo.core.readme``), and the platform
tests run in the copy with ``-k throwaway``: every registry-driven test collects the new method with no table to edit
and passes, the template's experiment writes its table, and the copy then differs from the original only at the
template's paths and the two generated files. A method without one of its facts fails naming the file and the fact.

Slow (about a minute: a pytest process in the copy trains, resumes, evaluates and exports a 2-parameter model)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.core.data import repo_root
from zoo.core.facts import FACTS

pytestmark = pytest.mark.slow

ROOT = repo_root()
COPIED = ("zoo", "tests", "recipes", "docs", "benchmarks", "tools", ".ci", "README.md", "pyproject.toml", "train.py")
COPIED += ("constraints.txt", "constraints-markllm.txt")
LINKED = ("data", "checkpoints", "results")
#: the registry-driven platform tests that must pick the new method up (test function names)
MUST_COLLECT = {
    "test_method_package_has_the_anatomy",
    "test_method_package_declares_its_facts",
    "test_method_files_use_the_one_vocabulary",
    "test_registered_datamodule_is_reached_from_datamodule_py",
    "test_module_follows_the_template",
    "test_card_has_equation_table_and_ends_with_a_verdict",
    "test_method_table_exists_and_matches_its_classes",
    "test_defaults_satisfy_their_constraints",
    "test_out_of_range_value_is_refused_before_training",
    "test_bad_user_data_fail_before_the_run_directory",
    "test_method_lifecycle",
    "test_killed_and_resumed_equals_straight",
    "test_recipe_composes_and_validates",
    "test_recipe_runs_with_tiny_overlay",
    "test_each_declared_file_refuses_a_binary_file_and_a_missing_column",
}
#: what adding the method may change besides its template paths: the generated argument table and README
GENERATED = {"zoo/core/schemas/throwaway.json", "README.md"}


def template_files() -> dict[str, str]:
    """``{repository path: text}`` of docs/adding-a-method.md's template blocks (a ``<!-- template: PATH -->`` line,
    then a fenced block): the test runs what the doc shows."""
    doc = (ROOT / "docs" / "adding-a-method.md").read_text()
    blocks = re.findall(r"<!-- template: (\S+) -->\n```\w*\n(.*?)\n```\n", doc, re.S)
    files = {path: text + "\n" for path, text in blocks}
    assert {"zoo/methods/throwaway/module.py", "recipes/throwaway.yaml"} <= set(files), (
        f"docs/adding-a-method.md lost template blocks: has {sorted(files)}"
    )
    return files


def fingerprint(root: Path) -> dict[str, str]:
    """``{path: sha256}`` of every file under the copied trees of ``root`` (caches left out)."""
    out = {}
    for top in COPIED:
        for p in [root / top] if (root / top).is_file() else (root / top).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts:
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run(copy: Path, *args: str, timeout: int = 540) -> subprocess.CompletedProcess:
    """``python ARGS`` in the copy, importing ``zoo`` from it."""
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1"}
    env.pop("ZOO_RUN_DIR", None)
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """A scratch copy of the repository without the template method."""
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        else:
            shutil.copy2(src, copy / name)
    for name in LINKED:
        (copy / name).symlink_to(ROOT / name)
    assert not (copy / "zoo" / "methods" / "throwaway").exists()
    return copy


def add_template(copy: Path) -> None:
    for path, text in template_files().items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(text)


def test_a_new_method_touches_its_folder_and_recipes_and_every_platform_test_picks_it_up(repo_copy, tmp_path):
    before = fingerprint(repo_copy)
    add_template(repo_copy)
    for cmd in (["-m", "zoo.core.schema", "--write", "throwaway"], ["-m", "zoo.core.readme"]):
        done = run(repo_copy, *cmd)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    pytest_args = [
        "-m",
        "pytest",
        "tests/platform",
        "-k",
        "throwaway",
        "-m",
        "slow or not slow",
        "-p",
        "no:cacheprovider",
    ]
    collected = run(repo_copy, *pytest_args, "--collect-only", "-q")
    ids = [line for line in collected.stdout.splitlines() if "[throwaway" in line]
    names = {i.split("::")[-1].split("[")[0] for i in ids}
    assert MUST_COLLECT <= names, f"not picked up by {sorted(MUST_COLLECT - names)}\n{collected.stdout[-3000:]}"
    done = run(repo_copy, *pytest_args, "tests/platform/test_readme_generated.py", "-q", "-rs")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed and int(passed.group(1)) >= len(ids), done.stdout[-3000:]  # every throwaway test ran
    assert not [line for line in done.stdout.splitlines() if line.startswith("SKIPPED") and "throwaway" in line], (
        done.stdout[-3000:]
    )

    results = tmp_path / "results"
    done = run(
        repo_copy, "-m", "zoo.methods.throwaway.experiments", "--seeds", "0",
        "--set", f"out_dir={tmp_path / 'runs'}", "trainer.max_steps=20", "logger.kind=none",
        "--results-dir", str(results),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads((results / "throwaway" / "slope.json").read_text())["rows"]
    assert [r["seed"] for r in rows] == [0] and rows[0]["slope_error"] < 2.0

    after = fingerprint(repo_copy)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    allowed = set(template_files()) | GENERATED
    assert changed - allowed == set(), (
        f"adding a method changed files outside its folder and recipes: {changed - allowed}"
    )
    assert GENERATED <= changed, "the generators wrote nothing for the new method"


def test_a_method_without_a_fact_is_told_what_to_add(repo_copy):
    add_template(repo_copy)
    init = repo_copy / "zoo" / "methods" / "throwaway" / "__init__.py"
    text = init.read_text()
    init.write_text(re.sub(r"^EXAMPLE = .*\n", "", text, flags=re.M))
    done = run(
        repo_copy, "-m", "pytest", "tests/platform/test_anatomy.py", "tests/platform/test_method_lifecycle.py",
        "-k", "throwaway and (facts or lifecycle)", "-p", "no:cacheprovider", "-q",
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1 and "2 failed" in out, out[-4000:]
    assert "zoo/methods/throwaway/__init__.py" in out and "EXAMPLE = ..." in out and FACTS["EXAMPLE"][:40] in out, out[
        -4000:
    ]
