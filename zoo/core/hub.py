"""Zoo weights: ``checkpoints/manifest.yaml``, sha256-verified packages, and weight-only loading.

A package is a folder ``checkpoints/<id>/`` holding ``model.safetensors`` (the LightningModule's state
dict), ``config.yaml`` (the fully resolved recipe that produced it) and ``README.md`` (its model card),
plus any extra files the method ships (a tokenizer). The manifest lists each file's sha256 and size; a
package is loaded only after every listed file matches. Nothing here unpickles untrusted data:
packages are safetensors, and Lightning ``.ckpt`` files are read with ``torch.load(weights_only=True)``.

Manifest layout::

    weights:
      zoo-lm.base:
        method: zoo-lm
        path: zoo-lm.base            # folder under checkpoints/
        files: {model.safetensors: {sha256: ..., size: ...}, config.yaml: {...}, README.md: {...}}
        recipe: recipes/zoo-lm.yaml
        data: [...]
        metrics: {val/ppl: ...}
        license: ...
        created: 2026-11-30T07:00:00Z

Kept as one module: the manifest, its sha256 checks and the loaders are one trust boundary; a
package's weights load only after the check in this file.
"""

from __future__ import annotations

import hashlib
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zoo.core import delta
from zoo.core.errors import UserError

ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*\.[A-Za-z0-9][A-Za-z0-9_.-]*$")


class HubError(UserError, ValueError):
    """A zoo id, package or weight file that cannot be used (unknown, missing, tampered, wrong shapes)."""


def checkpoints_dir() -> Path:
    """``$ZOO_CHECKPOINTS`` if set, else ``checkpoints/`` at the repository root."""
    from zoo.core.data import repo_root

    return Path(os.environ.get("ZOO_CHECKPOINTS") or repo_root() / "checkpoints")


def manifest_path() -> Path:
    return checkpoints_dir() / "manifest.yaml"


def read_manifest() -> dict[str, dict]:
    """The ``weights:`` mapping of the manifest (empty when there is no manifest).

    Raises:
        HubError: the manifest is not valid YAML or has no ``weights:`` mapping.
    """
    import yaml

    path = manifest_path()
    if not path.is_file():
        return {}
    try:
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}  # libyaml
    except yaml.YAMLError as e:
        raise HubError(f"{path}: invalid YAML: {e}") from None
    weights = doc.get("weights", {})
    if not isinstance(weights, dict):
        raise HubError(f"{path}: weights: must be a mapping of id -> entry")
    return weights


def list_pretrained(pattern: str = "*") -> list[str]:
    """Sorted zoo ids (``<method>.<tag>``) in the manifest matching the fnmatch ``pattern``."""
    import fnmatch

    return sorted(i for i in read_manifest() if fnmatch.fnmatch(i, pattern))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_entry(zoo_id: str, entry: dict) -> Path:
    """Check every file of a manifest entry against its size and sha256.

    Returns:
        The package folder.

    Raises:
        HubError: a file is missing or differs (the message names the file and both hashes).
    """
    folder = checkpoints_dir() / entry.get("path", zoo_id)
    files = entry.get("files") or {}
    if "model.safetensors" not in files or "config.yaml" not in files:
        raise HubError(f"{zoo_id}: manifest entry must list model.safetensors and config.yaml")
    for name, meta in files.items():
        p = folder / name
        if not p.is_file():
            raise HubError(
                f"{zoo_id}: missing file {p} (expected sha256 {meta.get('sha256')}); "
                f"the package is incomplete: restore it from the repository"
            )
        if p.stat().st_size != meta.get("size"):
            raise HubError(
                f"{zoo_id}: {p} has {p.stat().st_size} bytes, manifest says {meta.get('size')}; refusing "
                "a file that was changed after release"
            )
        got = sha256_file(p)
        if got != meta.get("sha256"):
            raise HubError(
                f"{zoo_id}: sha256 mismatch for {p}: manifest {meta.get('sha256')}, file {got}; "
                "refusing a file that was changed after release"
            )
    return folder


def _load_safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as e:
        raise HubError(f"{path}: not a readable safetensors file ({e})") from None


def _read_config(path: Path) -> dict:
    import yaml

    try:
        return yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise HubError(f"{path}: invalid YAML: {e}") from None


def load_package(ref: str, verify: bool = True) -> tuple[dict, dict]:
    """Load a package's resolved config and state dict.

    Args:
        ref: a zoo id from the manifest, or a package folder (``config.yaml`` + ``model.safetensors``).
        verify: check sha256 of every file of a zoo id first (default; never skip for untrusted files).

    A delta package (``base.yaml``, :mod:`zoo.core.delta`) is verified base first (the base's files, then its
    sha256 against the one the delta was written over), then its own files, and returned joined with its base.

    Returns:
        ``(config, state_dict)``; ``config`` is the resolved recipe (``method``, ``model``, ``data``, ...).

    Raises:
        HubError: unknown id (with a "did you mean"), missing or tampered files, a base that changed.
    """
    folder = Path(ref)
    if not (folder.is_dir() and (folder / "config.yaml").is_file()):
        manifest = read_manifest()
        if ref not in manifest and ("/" in ref or os.sep in ref or folder.exists()):
            raise HubError(
                f"{ref}: no such run directory or package folder"
                if not folder.exists()
                else f"{ref}: neither a run directory (config.yaml + checkpoints/) nor a package folder "
                "(config.yaml + model.safetensors)"
            )
        if ref not in manifest:
            from zoo.core.registry import suggest

            raise HubError(
                f"unknown zoo id {ref!r}{suggest(ref, manifest)}; known: {', '.join(sorted(manifest)) or 'none'}"
                f" (a local folder must hold config.yaml and model.safetensors)"
            )
        entry = manifest[ref]
        folder = checkpoints_dir() / entry.get("path", ref)
    try:
        doc = delta.read_base(folder)
        base = delta.base_state(doc, ref, read_manifest(), load_package) if doc else None  # base first
        if verify and ref in read_manifest() and not Path(ref).is_dir():
            verify_entry(ref, read_manifest()[ref])
        state = _load_safetensors(folder / "model.safetensors")
        if doc:
            state = delta.join(doc, state, ref, base)
    except delta.DeltaError as e:
        raise HubError(str(e)) from None
    return _read_config(folder / "config.yaml"), state


def describe_ref(ref: str) -> str:
    """Classify an ``init_from`` reference: ``zoo``, ``package``, ``hf``, ``ckpt`` or ``safetensors``.

    Raises:
        HubError: it is none of them (unknown id, missing path, a pickle format we refuse to read).
    """
    p = Path(ref)
    if p.is_dir():
        if (p / "config.yaml").is_file() and (p / "model.safetensors").is_file():
            return "package"
        if (p / "config.json").is_file():
            if not list(p.glob("*.safetensors")):
                raise HubError(f"{ref}: HF directory without *.safetensors weights (pickled .bin is refused)")
            return "hf"
        raise HubError(
            f"{ref}: a directory, but neither a zoo package (config.yaml + model.safetensors) "
            "nor an HF model directory (config.json + *.safetensors)"
        )
    if p.suffix == ".ckpt":
        if not p.is_file():
            raise HubError(f"{ref}: no such checkpoint file")
        return "ckpt"
    if p.suffix == ".safetensors":
        if not p.is_file():
            raise HubError(f"{ref}: no such file")
        return "safetensors"
    if p.suffix in (".bin", ".pt", ".pth", ".pkl"):
        raise HubError(f"{ref}: pickled weights are not loaded (they can run code); convert to safetensors")
    if ref in read_manifest():
        return "zoo"
    from zoo.core.registry import suggest

    raise HubError(
        f"{ref!r} is not a zoo id, package, HF directory, .ckpt or .safetensors file{suggest(ref, read_manifest())}"
    )


def read_ckpt(path: str | Path) -> dict:
    """A Lightning checkpoint read with ``torch.load(weights_only=True)``: no code in the file can run.

    Raises:
        HubError: the file holds objects outside torch's safe allow-list, or no ``state_dict``.
    """
    import torch

    try:
        ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:
        raise HubError(f"{path}: refused by torch.load(weights_only=True): {str(e).splitlines()[0]}") from None
    if "state_dict" not in ckpt:
        raise HubError(f"{path}: no state_dict in checkpoint")
    return ckpt


def load_source(ref: str) -> tuple[dict, str, dict]:
    """Weights for ``init_from`` with what is known of their origin: ``(state_dict, source_method, source_cfg)``.

    ``source_method`` is the method that saved them (from the package config or the run's config), ``"hf"`` for an
    HF model directory and ``""`` when unknown (a bare .safetensors). ``source_cfg`` is the resolved recipe that
    produced them (for a ``.ckpt``: the run's config.yaml with ``model`` replaced by the checkpoint's saved
    hyperparameters), ``{}`` when unknown.
    """
    kind = describe_ref(ref)
    if kind in ("zoo", "package"):
        cfg, state = load_package(ref)
        return state, cfg.get("method", ""), cfg
    if kind == "ckpt":
        import yaml

        ckpt = read_ckpt(ref)
        cfg_file = Path(ref).resolve().parent.parent / "config.yaml"
        cfg = (yaml.safe_load(cfg_file.read_text()) or {}) if cfg_file.is_file() else {}
        if ckpt.get("hyper_parameters"):
            cfg["model"] = dict(ckpt["hyper_parameters"])
        return ckpt["state_dict"], cfg.get("method", ""), cfg
    if kind == "safetensors":
        return _load_safetensors(Path(ref)), "", {}
    state: dict = {}
    for f in sorted(Path(ref).glob("*.safetensors")):
        state.update(_load_safetensors(f))
    return state, "hf", {}


def load_weights(ref: str) -> tuple[dict, str]:
    """``(state_dict, source_method)`` of :func:`load_source`."""
    state, method, _ = load_source(ref)
    return state, method


def clean_state_dict(state: dict) -> dict:
    """Strip the ``module.`` (DDP) and ``_orig_mod.`` (torch.compile) prefixes from keys."""
    out = {}
    for k, v in state.items():
        for pre in ("module.", "_orig_mod."):
            while k.startswith(pre):
                k = k[len(pre) :]
        out[k.replace("._orig_mod.", ".")] = v
    return out


def is_head_key(key: str, heads) -> bool:
    """Whether ``key`` is one of a module's declared ``head_keys``: a prefix, or an fnmatch pattern when it holds
    ``*`` (``"policy.*lora_*"``)."""
    import fnmatch

    return any(fnmatch.fnmatchcase(key, h) if "*" in h else key.startswith(h) for h in heads)


def _table(title: str, bad: list[tuple[str, Any, Any]]) -> str:
    width = max(len(b[0]) for b in bad)
    rows = "\n".join(f"  {k:<{width}}  {a!s:>18}  {b!s:>18}" for k, a, b in bad[:40])
    more = f"\n  ... and {len(bad) - 40} more" if len(bad) > 40 else ""
    return f"{title}\n  {'key':<{width}}  {'checkpoint':>18}  {'model':>18}\n{rows}{more}"


def check_fit(module, state: dict, heads=(), where: str = "weights") -> dict[str, list[str]]:
    """Compare a state dict with ``module.state_dict()``: THE loading contract of every load path.

    Missing keys (in the model, not in ``state``), unexpected keys (in ``state``, not in the model) and keys whose
    shapes differ (other than the module's ``fit_sized_buffers``) are refused, except keys matching ``heads`` (:func:`is_head_key`), which are reported for
    re-initialisation (missing or reshaped) or dropping (unexpected).

    Returns:
        ``{"missing": [...], "unexpected": [...], "reshaped": [...]}``, head keys only.

    Raises:
        HubError: any non-head mismatch; the message counts each kind and tables key, checkpoint shape, model shape.
    """
    own = module.state_dict()
    fit_sized = set(getattr(module, "fit_sized_buffers", ()))  # shapes known only after fit: presence is checked
    report: dict[str, list[str]] = {"missing": [], "unexpected": [], "reshaped": []}
    bad, counts = [], {"missing": 0, "unexpected": 0, "reshaped": 0}
    for k, v in state.items():
        reshaped = k not in fit_sized and tuple(v.shape) != tuple(own[k].shape) if k in own else False
        kind = "unexpected" if k not in own else "reshaped" if reshaped else None
        if kind is None:
            continue
        if is_head_key(k, heads):
            report[kind].append(k)
        else:
            counts[kind] += 1
            bad.append((k, tuple(v.shape), "-" if k not in own else tuple(own[k].shape)))
    for k, v in own.items():
        if k not in state:
            if is_head_key(k, heads):
                report["missing"].append(k)
            else:
                counts["missing"] += 1
                bad.append((k, "-", tuple(v.shape)))
    if bad:
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        raise HubError(
            _table(
                f"{where} do not fit {type(module).__name__} ({summary}; head keys that may change: "
                f"{tuple(heads) or 'none'}):",
                bad,
            )
        )
    return report


def load_exact(module, state: dict, where: str = "weights") -> None:
    """Load a state dict saved by the same method into ``module``: every key must be present, known and of the
    same shape (no head keys excused). Used by ``zoo.load``, ``zoo eval / predict / export`` and ``resume``.

    Raises:
        HubError: the :func:`check_fit` table.
    """
    state = clean_state_dict(state)
    check_fit(module, state, (), where)
    module.load_state_dict(state, strict=True)


def adapt_and_load(
    module, state: dict, source_method: str = "", where: str = "init_from", source_cfg: dict | None = None
) -> dict[str, list[str]]:
    """``init_from``: load weights into ``module`` under the loading contract, re-initialising declared head keys.

    ``module.remap_init_state`` first maps the source's keys (another method's, an HF directory's) onto this
    module's; what it returns is then held to :func:`check_fit` with ``module.head_keys`` excused: head keys
    missing from the source or of another shape keep their fresh initialisation, unexpected head keys are dropped.

    Returns:
        ``{"missing": [...], "unexpected": [...], "reshaped": [...]}`` (head keys) for the log.

    Raises:
        HubError: any other missing, unexpected or reshaped key, with a table of key, checkpoint and model shape.
    """
    try:
        state = module.remap_init_state(clean_state_dict(state), source_method, source_cfg)
    except (KeyError, ValueError) as e:
        raise HubError(f"{where}: {e}") from None
    report = check_fit(module, state, tuple(module.head_keys), where)
    skip = set(report["unexpected"]) | set(report["reshaped"])
    module.load_state_dict({k: v for k, v in state.items() if k not in skip}, strict=False)
    return report


@contextmanager
def _manifest_lock():
    import fcntl

    path = checkpoints_dir() / ".manifest.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_manifest_entry(zoo_id: str, entry: dict[str, Any]) -> None:
    """Add or replace one manifest entry (under a file lock, keeping the other entries)."""
    import yaml

    with _manifest_lock():
        weights = read_manifest()
        weights[zoo_id] = entry
        text = "# Zoo weights: written by `zoo release`; verified on every load.\n"
        text += yaml.safe_dump({"weights": dict(sorted(weights.items()))}, sort_keys=False)
        manifest_path().write_text(text)


def file_entry(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}
