"""The locked environment (#36): constraints*.txt pin every requirement of pyproject.toml inside its range, no extra
moves the core resolution, the README installs through the lock and states its pins truly, and ``tools/lock.py``
reads, compares and renders lock files as documented."""

from __future__ import annotations

import importlib.util
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from readme_runner import blocks, commands

from zoo.core.data import repo_root

ROOT = repo_root()
_spec = importlib.util.spec_from_file_location("zoo_lock_tool", ROOT / "tools" / "lock.py")
lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock)

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: the stack the mission names, whose locked versions README states
STACK = ("torch", "lightning", "transformers", "peft", "timm", "torchmetrics", "wandb", "omegaconf")


def requirements(requirement: str) -> list[Requirement]:
    """Every third-party requirement ``pip install -e "<requirement>"`` asks for: core plus the named extras,
    self-references (``zoo[text]``) followed, environment markers evaluated."""
    extras = set(re.findall(r"\[(.*)\]", requirement)[0].split(",")) if "[" in requirement else set()
    out, todo, seen = [], list(extras), set()
    out += [Requirement(r) for r in PROJECT["dependencies"]]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in PROJECT["optional-dependencies"][extra]:
            req = Requirement(text)
            if lock.canonical(req.name) == lock.PROJECT:
                todo += sorted(req.extras)
            else:
                out.append(req)
    return [r for r in out if r.marker is None or r.marker.evaluate({"extra": ""})]


@pytest.mark.parametrize("lock_name", sorted(lock.LOCKS))
def test_every_requirement_is_pinned_inside_its_range(lock_name):
    pins, _ = lock.read_lock(ROOT / lock_name)
    for req in requirements(lock.LOCKS[lock_name]):
        name = lock.canonical(req.name)
        assert name in pins, f"{lock_name} has no pin for {req}: refresh it with `{lock.REFRESH}`"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{lock_name} pins {name}=={pins[name]} outside pyproject's {req}: refresh it with `{lock.REFRESH}`"
        )


def test_every_extra_is_in_a_lock():
    locked = set()
    for requirement in lock.LOCKS.values():
        if "[" in requirement:
            todo = re.findall(r"\[(.*)\]", requirement)[0].split(",")
            while todo:
                extra = todo.pop()
                locked.add(extra)
                todo += [
                    e
                    for r in PROJECT["optional-dependencies"][extra]
                    for e in Requirement(r).extras
                    if lock.canonical(Requirement(r).name) == lock.PROJECT and e not in locked
                ]
    missing = set(PROJECT["optional-dependencies"]) - locked
    assert not missing, f"extras in no lock file: {sorted(missing)}; add them to `dev` or to tools/lock.py LOCKS"


@pytest.mark.parametrize("lock_name", sorted(lock.LOCKS))
def test_no_extra_moves_the_core_stack(lock_name):
    pins, core = lock.read_lock(ROOT / lock_name)
    assert {"torch", "lightning", "transformers"} <= core.keys(), f"{lock_name}'s header lacks the core resolution"
    assert lock.core_stack() <= core.keys(), f"{lock_name}'s header lacks part of the core resolution"
    moved = lock.moved_by_extras(core, pins, lock.core_stack())
    assert not moved, f"{lock_name}: extras moved the core stack: {moved}"


def test_readme_installs_through_the_lock():
    """Every ``pip install -e`` the README gives uses the lock; the CPU torch line pins the locked torch."""
    pins, _ = lock.read_lock(ROOT / "constraints.txt")
    installs = [
        c
        for _, text, _ in blocks(ROOT / "README.md", langs=("bash", "sh"))
        for c in commands(text)
        if c[:2] == ["pip", "install"]
    ]
    editable = [c for c in installs if "-e" in c]
    assert editable, "README shows no `pip install -e` command"
    for cmd in editable:
        assert "-c" in cmd and cmd[cmd.index("-c") + 1].startswith("constraints"), (
            f"README installs without the lock: {' '.join(cmd)}"
        )
    for cmd in installs:
        for arg in cmd:
            if arg.startswith("torch=="):
                assert arg == f"torch=={pins['torch']}", f"README's {arg} is not the locked torch {pins['torch']}"


def test_readme_states_the_locked_stack():
    pins, _ = lock.read_lock(ROOT / "constraints.txt")
    text = (ROOT / "README.md").read_text()
    counts = re.findall(r"`constraints.txt` pins all (\d+) packages", text)
    assert counts == [str(len(pins))], f"README's package count {counts} is not the lock's {len(pins)}"
    for name in STACK:
        stated = re.findall(rf"`{name} ([0-9][^`]*)`", text)
        assert stated, f"README does not state the locked {name} version (as `{name} X.Y.Z`)"
        assert set(stated) == {pins[name]}, f"README says {name} {stated}, constraints.txt pins {pins[name]}"


def test_read_lock_parses_pins_and_names_a_bad_line(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("# a comment\n# core alone: Foo_Bar==1.0 baz==2\nfoo-bar==1.0\nBaz==2\nqux==3.1+cpu\n")
    assert lock.read_lock(path) == ({"foo-bar": "1.0", "baz": "2", "qux": "3.1+cpu"}, {"foo-bar": "1.0", "baz": "2"})
    path.write_text("foo==1\nbar>=2\n")
    with pytest.raises(ValueError, match=r"c.txt:2: 'bar>=2' is not name==version"):
        lock.read_lock(path)


def test_moved_and_diff_on_hand_cases():
    core = {"numpy": "2.4.6", "torch": "2.14.1"}
    assert lock.moved_by_extras(core, {"numpy": "2.4.6", "torch": "2.14.1", "pot": "0.9"}) == []
    assert lock.moved_by_extras(core, {"numpy": "1.26.4", "torch": "2.14.1"}) == ["numpy 2.4.6 -> 1.26.4"]
    assert lock.moved_by_extras(core, {"numpy": "1.26.4", "torch": "2.14.1"}, only={"torch"}) == []
    assert {"torch", "lightning", "numpy"} <= lock.core_stack()
    assert lock.diff({"a": "1", "b": "2"}, {"b": "3", "c": "1"}) == ["a 1 -> absent", "b 2 -> 3", "c absent -> 1"]


def test_render_round_trips(tmp_path):
    core = {f"pkg{i}": f"{i}.0" for i in range(40)}  # long enough to wrap the core header over several lines
    pins = {**core, "extra-only": "0.1"}
    path = tmp_path / "constraints.txt"
    path.write_text(lock.render("constraints.txt", ".[dev]", pins, core))
    assert lock.read_lock(path) == (pins, core)
    assert max(len(line) for line in path.read_text().splitlines()) <= 120
