"""Registry: lazy listing, checked kwargs, duplicate names, light `import zoo`."""

import subprocess
import sys

import pytest

import zoo
from zoo.core.registry import RegistryError, register_method


def test_list_methods_includes_plugins_and_builtins():
    from zoo.methods import METHODS

    names = zoo.list_methods()
    assert "digits-mlp" in names and set(METHODS) <= set(names)
    assert "digits-mlp" in zoo.list_methods("digits-*")
    assert all(m.startswith("digits-") for m in zoo.list_methods("digits-*"))


def test_create_checks_kwargs():
    m = zoo.create("digits-mlp", hidden=4)
    assert m.hparams.hidden == 4
    with pytest.raises(
        RegistryError,
        match=r"model.hiden: DigitsMLP takes no argument 'hiden' \(did you mean 'hidden'\?\); "
        r"allowed: hidden, num_classes, optimizer",
    ):
        zoo.create("digits-mlp", hiden=4)
    with pytest.raises(RegistryError, match="unknown method 'digits-mpl' \\(did you mean 'digits-mlp'\\?\\)"):
        zoo.create("digits-mpl")


def test_duplicate_names_raise():
    zoo.create("digits-mlp")

    class Other:
        pass

    with pytest.raises(RegistryError, match="registered twice"):
        register_method("digits-mlp")(Other)


def test_import_zoo_is_light():
    code = "import sys, zoo; zoo.list_methods(); zoo.list_pretrained(); print(sorted(m for m in ('torch', 'lightning', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_builtin_method_declares_the_contract():
    from zoo.core.module import ZooModule
    from zoo.core.registry import get_method
    from zoo.methods import METHODS

    for name in METHODS:
        entry = get_method(name)
        assert issubclass(entry.module_cls, ZooModule), name
        assert entry.module_cls.__doc__, f"{name}: module class needs a docstring"
        assert set(entry.module_cls.export_formats) <= {"package", "hf", "onnx", "torch_export"}


def test_cli_list_and_info(capsys):
    from zoo.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "methods:" in out and "digits-mlp" in out and "zoo weights:" in out
    assert main(["info", "digits-mlp"]) == 0
    out = capsys.readouterr().out
    assert "hidden: int = 32" in out and "export formats: package, onnx, torch_export" in out
    assert main(["info", "nosuch.weights"]) == 2
    assert "unknown zoo id" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2


def test_methods_do_not_reach_into_each_other():
    """DESIGN.md: methods depend on zoo.core and zoo.models only (shared parts are lifted there)."""
    import re

    from zoo.core.data import repo_root

    methods = repo_root() / "zoo" / "methods"
    for pkg in (p for p in methods.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for f in pkg.rglob("*.py"):
            for other in re.findall(r"zoo\.methods\.(\w+)", f.read_text()):
                assert other == pkg.name, f"{f}: uses zoo.methods.{other}"
            assert "get_method(" not in f.read_text(), f"{f}: reaches another method through the registry"


def test_method_with_a_missing_extra_fails_with_the_install_command(tmp_path, monkeypatch, capsys):
    """A method whose stack is not installed says which extra to install (its package's ``EXTRA`` fact, read without
    importing the method), in one line, never a traceback."""
    from zoo.cli import main
    from zoo.core import registry

    (tmp_path / "needs_stack").mkdir()
    (tmp_path / "needs_stack" / "__init__.py").write_text(
        '"""Facts read before the module is imported."""\nEXTRA = "graph"\n'
    )
    (tmp_path / "needs_stack" / "module.py").write_text("import zoo_test_absent_stack  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ZOO_PLUGINS", "stacked=needs_stack.module")
    with pytest.raises(
        registry.RegistryError,
        match=r"^stacked needs pip install -e \"\.\[graph\]\" \(missing module 'zoo_test_absent_stack'\)$",
    ):
        registry.get_method("stacked")
    assert main(["info", "stacked"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: stacked needs pip install -e \".[graph]\" (missing module 'zoo_test_absent_stack')"
    ]


def test_info_and_list_without_the_extra_read_the_stored_table(capsys, monkeypatch, uninstall):
    """Without its extra, ``zoo info`` prints a method's arguments from zoo/core/schemas/ (never importing it) with the
    install line, each with its allowed values and one-line meaning, and ``zoo list`` marks the method and its zoo
    weights."""
    import sys

    from zoo.cli import main

    uninstall("opacus")
    monkeypatch.delitem(sys.modules, "zoo.methods.cond_dp.module", raising=False)
    assert main(["info", "cond-dp"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == 'cond-dp needs pip install -e ".[privacy]" (missing opacus)'
    model, data = lines.index("model:"), lines.index("data:")
    assert "  epsilon: float > 0  -- privacy target; σ is calibrated for the planned number of Poisson steps." in lines
    assert "  in_features: int >= 1 or null  -- filled from the data in ``setup`` (saved so packages rebuild)." in lines
    assert lines[model + 1].startswith("  model: one of 'mlp', 'linear'  -- ``mlp`` or ``linear``"), lines
    assert "  batch_size: int >= 1  -- expected Poisson batch qN." in lines[data:]
    assert "export formats: package, onnx, torch_export" in lines
    assert "zoo.methods.cond_dp.module" not in sys.modules
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    mark = '  (not ready: pip install -e ".[privacy]"; missing opacus)'
    assert f"  cond-dp{mark}\n" in out and f"  cond-dp.commuting-sf-eps1{mark}\n" in out
    assert "  zoo-lm.chat\n" in out


def test_missing_requirements_reads_the_extras_from_package_metadata(monkeypatch):
    from importlib import metadata

    from zoo.core import registry

    monkeypatch.setattr(
        metadata,
        "requires",
        lambda _: [
            'torch-geometric>=2.6; extra == "graph"',
            'zoo_absent_dist>=1; extra == "graph"',
            'zoo[export]; extra == "dev"',
            "numpy>=2",
        ],
    )
    assert registry.missing_requirements("graph") == ["zoo_absent_dist"]
    assert registry.missing_requirements("dev") == []


def test_every_declared_extra_exists_is_in_dev_and_named_in_the_readme():
    import tomllib

    from zoo.core.data import repo_root
    from zoo.core.registry import method_extra
    from zoo.methods import METHODS

    root = repo_root()
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dev = " ".join(extras["dev"])
    readme = " ".join((root / "README.md").read_text().split())
    for method in METHODS:
        if (extra := method_extra(method)) is None:
            continue
        assert extra in extras, (method, extra)
        assert extra in dev.split("[", 1)[1], f"the dev extra does not install {extra!r} (CI would miss it)"
        assert f"`{method}` needs `.[{extra}]`" in readme or f"`{method}` `.[{extra}]`" in readme, method


def test_info_reads_the_table_without_importing_torch():
    """``zoo info`` of an installed method also comes from its table: every argument with its allowed values and
    meaning, a dict block's keys indented under it, in the constructor's order, and torch is never imported."""
    import subprocess
    import sys

    probe = (
        "import sys; from zoo.cli import main; rc = main(['info', 'survshap-iq']); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "torch not imported"
    assert lines[lines.index("model:") + 1].startswith("  model: one of 'deepsurv', 'deephit', 'coxph'")
    assert "  sigma: float > 0  -- DeepHit's NLL weight and ranking-loss scale." in lines
    explain = next(i for i, x in enumerate(lines) if x.startswith("  explain: dict or null  -- what"))
    assert "    index: one of 'k-SII', 'SII', 'STII', 'FSII', 'FBII', 'SV', 'BV', 'BII', 'CHII'" in lines[explain:]
    assert "  test_fraction: float in [0, 1)  -- shares of rows held out (seeded split by ``seed``)." in lines


def test_zoo_list_stays_light():
    """``zoo list`` (target < 1 s, issue #41) imports no torch, numpy or Lightning and none of the recipe/export/run
    machinery: the CLI catches ``UserError`` instead of importing every module that defines an error type."""
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\nfrom zoo.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['list'])\n"
        "print(' '.join(m for m in ('torch', 'numpy', 'lightning', 'zoo.core.export', 'zoo.core.recipe', "
        "'zoo.core.run') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_a_method_registered_in_process_lists_and_reads_its_facts(capsys):
    """A method registered by a script or a test (not under zoo/methods, not a plug-in) does not break `zoo list`:
    its facts default like a plug-in module's (found when the full suite ran `zoo list` after test_steps had
    registered `two-optimiser-digits`)."""
    from zoo.cli import main
    from zoo.core import registry
    from zoo.core.registry import method_extra

    @register_method("in-process-digits")
    class InProcess:
        pass

    try:
        assert method_extra("in-process-digits") is None
        assert main(["list"]) == 0
        assert "in-process-digits" in capsys.readouterr().out
    finally:
        registry._METHODS.pop("in-process-digits")


def test_every_argument_in_every_table_has_a_meaning():
    """``zoo info METHOD`` prints each argument's one-line meaning (#42): every model and data argument of every
    stored table has one, read off its class's ``Args:`` docstring (``a, b: text`` documents both)."""
    import json

    from zoo.core.schema import SCHEMA_DIR

    missing = []
    for path in sorted(SCHEMA_DIR.glob("*.json")):
        if path.name.startswith("_"):
            continue
        table = json.loads(path.read_text())
        for block, part in (("model", table["module"]), ("data", table["datamodule"])):
            docs = (part or {}).get("docs") or {}
            missing += [f"{path.stem}: {block}.{k}" for k in (part or {}).get("args", {}) if not docs.get(k)]
    assert not missing, f"arguments without a meaning in their class's Args: docstring: {missing}"
