"""Offline, deterministic test setup shared by every test: run from the repository root, no network."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ROOT / "tests" / "platform"

# one intra-op thread: the test models are tiny, and two threads per process thrash on a 2-core machine
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["WANDB_MODE"] = "offline"
os.environ.setdefault("WANDB_SILENT", "true")
os.environ["ZOO_PLUGINS"] = "digits-mlp=toy_digits"
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLATFORM), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(PLATFORM))
os.chdir(ROOT)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """Each test starts without a pinned run directory and at the repository root."""
    monkeypatch.delenv("ZOO_RUN_DIR", raising=False)
    monkeypatch.chdir(ROOT)
    yield
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture
def zoo_home(tmp_path, monkeypatch):
    """An empty checkpoints/ folder for tests that release or tamper with zoo weights."""
    home = tmp_path / "checkpoints"
    home.mkdir()
    monkeypatch.setenv("ZOO_CHECKPOINTS", str(home))
    return home


@pytest.fixture
def uninstall(monkeypatch):
    """``uninstall("opacus")``: the named distributions read as not installed to zoo's extra checks
    (``zoo.core.registry.missing_requirements`` asks ``importlib.metadata.version``); nothing is removed."""
    from importlib import metadata

    def absent(*dists: str) -> None:
        real = metadata.version

        def version(dist: str) -> str:
            if dist in dists:
                raise metadata.PackageNotFoundError(dist)
            return real(dist)

        monkeypatch.setattr(metadata, "version", version)

    return absent


@pytest.fixture(scope="module")
def stand_in_base(tmp_path_factory):
    """The tiny stand-in for the base ``smollm2-135m-instruct`` (tests/platform/stand_in_base.py), fetched through the
    real pipeline into a private ``$ZOO_CACHE`` for one test module; yields the converted base directory. Tests that
    use it skip without the ``gguf`` package (``.[bases]``)."""
    pytest.importorskip("gguf")
    from stand_in_base import install_stand_in

    with pytest.MonkeyPatch.context() as mp:
        yield install_stand_in(tmp_path_factory.mktemp("bases"), mp)[0]
