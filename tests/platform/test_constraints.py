"""Every value constraint a method declares with its arguments (``zoo/core/constraints.py``, recorded in
``zoo/core/schemas/``) refuses an out-of-range value before training: one bad value is generated per declared
constraint of every method's ``model:`` and ``data:`` arguments, nested blocks included, from the tables themselves
(iterating the registry, no hand list), and ``zoo train`` must exit 2 naming the key, with no run directory."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from zoo.cli import main
from zoo.core import schema
from zoo.core.recipe import recipes_dir
from zoo.methods import METHODS


def recipe_of(method: str) -> str:
    """The method's shipped CPU recipe: ``<method>.yaml`` when it exists, else the first that names the method."""
    if (recipes_dir() / f"{method}.yaml").is_file():
        return f"{method}.yaml"
    for path in sorted(recipes_dir().glob("*.yaml")):
        if (yaml.safe_load(path.read_text()) or {}).get("method") == method:
            return path.name
    raise AssertionError(f"no recipe in recipes/ runs {method}")


def _bad_numbers(spec: dict) -> list[tuple[object, str]]:
    """(value, message fragment) just outside each end of a spec's numeric range."""
    is_int = "int" in spec.get("types", []) and "float" not in spec.get("types", [])
    out = []
    if "min" in spec:
        lo = spec["min"]
        out.append((lo if spec.get("min_exclusive") else (lo - 1 if is_int else lo - 0.5), "must be"))
    if "max" in spec:
        hi = spec["max"]
        out.append((hi if spec.get("max_exclusive") else (int(hi) + 1 if is_int else hi + 0.5), "must be"))
    return out


def violations(spec: dict, key: str) -> list[tuple[str, object, str, str]]:
    """``(key, bad value, key the error names, fragment it contains)`` for each constraint of ``spec`` at ``key``: a
    range end, an unknown enum value (a typo of the first, which gets a did-you-mean), an empty list, a bad list
    item (the error names ``key[0]``), a bad key inside a dict block."""
    out = [(key, v, key, frag) for v, frag in _bad_numbers(spec)]
    choices = spec.get("choices", [])
    strings = [c for c in choices if isinstance(c, str)]
    if strings:
        out.append((key, strings[0] + "x", key, f"(did you mean {strings[0]!r}?)"))
    elif choices and all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        out.append((key, max(choices) + 1, key, "expected one of"))
    if spec.get("min_length"):
        out.append((key, [], key, f"needs at least {spec['min_length']} item"))
    for _k, item, named, frag in violations(spec["items"], f"{key}[0]") if "items" in spec else ():
        out.append((key, [item], named, frag))
    for sub, sub_spec in (spec.get("keys") or {}).items():
        for _k, v, named, frag in violations(sub_spec, f"{key}.{sub}"):
            out.append((key, {sub: v}, named, frag))  # the block with one bad key (``{net: {n_bits: 0}}``)
    return out


def method_cases(method: str) -> list[tuple[str, object, str, str]]:
    table = schema.method_schema(method)
    cases = []
    for block, part in (("model", table["module"]), ("data", table["datamodule"])):
        if part is None:
            continue
        for arg, spec in part["args"].items():
            nested = part.get("nested", {}).get(arg)
            if arg == "optimizer":
                nested = None  # the shared optimiser table has its own cases in test_malformed.py
            cases += violations(dict(spec, keys=nested) if nested else spec, f"{block}.{arg}")
    return cases


CASES = [(m, *c) for m in sorted(METHODS) for c in method_cases(m)]


def twin_tied(method: str, key: str) -> bool:
    """Whether the method's recipe writes ``model.<k>`` as an interpolation of ``data.<k>`` or the reverse."""
    from zoo.core.recipe import compose

    cfg, arg = compose(recipes_dir() / recipe_of(method)), key.split(".")[1].split("[")[0]
    values = [str((cfg.get(b) or {}).get(arg, "")) for b in ("model", "data")]
    return any(v.startswith("${") for v in values)


def _token(key: str, value) -> str:
    return f"+{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"


def test_every_method_declares_constraints():
    """Each method constrains some of its arguments (a method with none would make the test below vacuous for it)."""
    counts = {m: sum(1 for c in CASES if c[0] == m) for m in METHODS}
    assert all(counts.values()), {m: n for m, n in counts.items() if not n}
    assert len(CASES) > 400, len(CASES)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_defaults_satisfy_their_constraints(method):
    """Each constructor default passes its own declared constraint (a constraint that refuses the default is wrong),
    and so does each declared dict block's defaults dict."""
    import inspect

    from zoo.core.registry import get_method, method_extra, missing_requirements

    extra = method_extra(method)
    if extra and missing_requirements(extra):
        pytest.skip(f"{method} needs the {extra} extra")
    entry, table = get_method(method), schema.method_schema(method)
    for block, cls, part in (
        ("model", entry.module_cls, table["module"]),
        ("data", entry.datamodule_cls, table["datamodule"]),
    ):
        for name, param in inspect.signature(cls.__init__).parameters.items() if cls else ():
            if name in part["args"] and param.default is not param.empty:
                default = list(param.default) if isinstance(param.default, tuple) else param.default
                schema.check_value(default, part["args"][name], f"{block}.{name}")


@pytest.mark.parametrize("method,key,value,named,fragment", CASES, ids=[f"{c[0]}:{c[1]}={c[2]!r}"[:90] for c in CASES])
def test_out_of_range_value_is_refused_before_training(method, key, value, named, fragment, tmp_path, capsys):
    runs = tmp_path / "runs"
    code = main(["train", f"recipe={recipe_of(method)}", _token(key, value), f"out_dir={runs}"])
    err = capsys.readouterr().err
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    # a recipe that ties data.window to ${model.window} (or back) is refused at whichever block reads it first
    twin = ("data" if named.startswith("model.") else "model") + named[named.index(".") :]
    assert line.startswith(f"error: {named}: ") or line.startswith(f"error: {twin}: ") and twin_tied(method, named), err
    assert fragment in line, err
    assert not runs.exists()


def test_refusals_come_before_torch_is_imported(tmp_path):
    """One process checks the first generated case of every method: exit 2 for each, and torch never imported."""
    firsts = {}
    for method, key, value, named, _ in CASES:
        firsts.setdefault(method, (key, value, named))
    probe = (
        "import sys, json; from zoo.cli import main\n"
        "for recipe, token, out in json.loads(sys.argv[1]):\n"
        "    assert main(['train', f'recipe={recipe}', token, f'out_dir={out}']) == 2, token\n"
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported')"
    )
    import json

    args = [[recipe_of(m), _token(k, v), str(tmp_path / "runs")] for m, (k, v, _n) in firsts.items()]
    out = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "torch not imported", out.stdout
    assert out.stderr.count("error: ") == len(firsts), out.stderr
    for _k, _v, named in firsts.values():
        assert f"error: {named}: " in out.stderr
    assert not (tmp_path / "runs").exists()


def test_a_setting_without_the_argument_it_needs_is_refused_before_torch(tmp_path):
    """ShaPO's model_rules: ``variant: reward`` without ``cost_model`` fails naming model.cost_model, exit 2, torch
    never imported, no run directory (the module would refuse it only after the torch import)."""
    probe = (
        "import sys; from zoo.cli import main\n"
        f"code = main(['train', 'recipe=shapo-reward-smollm2.yaml', 'model.cost_model=null', 'out_dir={tmp_path / 'runs'}'])\n"
        "ok = main(['config', 'recipe=shapo-reward-smollm2.yaml'])\n"
        "print(code, ok, 'torch imported' if 'torch' in sys.modules else 'torch not imported')"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip().splitlines()[-1] == "2 0 torch not imported", (out.stdout, out.stderr[-2000:])
    assert "model.cost_model: model.variant=reward takes its soft labels from a cost model" in out.stderr
    assert not (tmp_path / "runs").exists()
