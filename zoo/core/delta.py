"""Packages over a base: a package that stores only the tensors that differ from another zoo package.

A delta package is an ordinary package folder (``model.safetensors``, ``config.yaml``, ``README.md``) plus
``base.yaml``::

    base: zoo-lm.base                      # a manifest id, or a pretrained base id (zoo.core.bases)
    base_sha256: ef15679f...               # sha256 of the base's model.safetensors when this package was written
                                           # (of a pretrained base: its GGUF file's, from the registry)
    keys:                                  # tensors of this package taken unchanged from the base
      lm.model.layers.0.mlp.up_proj.weight: lm.model.layers.0.mlp.up_proj.weight
      policy.base_model.model.model.embed_tokens.weight: lm.model.embed_tokens.weight   # (a LoRA model over it)

``model.safetensors`` then holds only the rest: what training changed (a fine-tuned head, a projector, LoRA
adapters, an encoder), while frozen parts are named in ``keys``. Loading (:func:`zoo.core.hub.load_package`)
verifies the chain base first: the base's manifest entry, its sha256 against ``base_sha256`` (a base re-released
after this package was written is refused, because the delta no longer describes the same model), then this
package's own files; the two are joined into one full state dict, so every load path sees the same weights a full
copy would give. The join is exact: a key whose tensor differs from the base's by a single bit is stored.

A package over a pretrained base (``smollm2-135m-instruct``: a LoRA run on ``model.arch=smollm2-135m-instruct``) is
written this way automatically (:func:`split_for_package`), so base weights never enter ``checkpoints/``; its base
state is the converted directory in the cache (``zoo base fetch NAME``), identified by the GGUF file's sha256.
"""

from __future__ import annotations

from pathlib import Path

import yaml

BASE_FILE = "base.yaml"


class DeltaError(ValueError):
    """A delta package that cannot be joined (malformed ``base.yaml``, a base that is missing or changed);
    ``zoo.core.hub.load_package`` reports it as a ``HubError``."""


def read_base(folder: Path) -> dict | None:
    """The ``base.yaml`` of a package folder, ``None`` for a full package.

    Raises:
        DeltaError: the file is not a mapping with ``base``, ``base_sha256`` and ``keys``.
    """
    path = Path(folder) / BASE_FILE
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise DeltaError(f"{path}: invalid YAML: {e}") from None
    if (
        not isinstance(doc, dict)
        or not {"base", "base_sha256", "keys"} <= set(doc)
        or not isinstance(doc["keys"], dict)
    ):
        raise DeltaError(f"{path}: must map base (a zoo id), base_sha256 and keys (own key -> base key)")
    return doc


def base_state(doc: dict, where: str, manifest: dict, load_package) -> dict:
    """The verified base state dict named by a ``base.yaml`` document (the base's own chain verified first).

    Args:
        manifest: the manifest's ``weights`` mapping; load_package: ``zoo.core.hub.load_package`` (passed in so that
            this module does not import the hub).

    Raises:
        DeltaError: the base is not in the manifest, or its weights are not the ones the delta was written against.
    """
    base = doc["base"]
    entry = manifest.get(base)
    from zoo.core import bases

    if entry is None and base in bases.BASES:
        if doc["base_sha256"] != bases.base_sha256(base):
            raise DeltaError(
                f"{where}: written over {base} with GGUF sha256 {doc['base_sha256']}, but the registry's "
                f"{base} is {bases.base_sha256(base)}; the base changed"
            )
        try:
            return bases.base_state(base)
        except bases.BaseError as e:
            raise DeltaError(f"{where}: {e}") from None
    if entry is None:
        raise DeltaError(f"{where}: its base {base!r} is not in the manifest; a delta package needs its base")
    have = (entry.get("files") or {}).get("model.safetensors", {}).get("sha256")
    if have != doc["base_sha256"]:
        raise DeltaError(
            f"{where}: written over {base} with model.safetensors sha256 {doc['base_sha256']}, but the "
            f"manifest's {base} is {have}; the base changed, so this delta no longer describes its model"
        )
    _, state = load_package(base)
    return state


def join(doc: dict, delta: dict, where: str, base: dict) -> dict:
    """A delta package's full state dict: ``keys`` taken from the verified ``base`` state (:func:`base_state`), the
    stored tensors on top.

    Raises:
        DeltaError: a key is both stored and taken from the base, or names a tensor the base lacks.
    """
    both = sorted(set(doc["keys"]) & set(delta))
    absent = sorted(b for b in doc["keys"].values() if b not in base)
    if both or absent:
        raise DeltaError(
            f"{where}: base.yaml is inconsistent: stored and taken from the base {both[:5]}; not in "
            f"{doc['base']} {absent[:5]}"
        )
    return {**{k: base[b] for k, b in doc["keys"].items()}, **delta}


def _plain(key: str) -> str:
    """A key without peft's wrapper names (``base_model.model.``, ``.base_layer``)."""
    return key.replace("base_model.model.", "").replace(".base_layer.", ".")


def split_over_base(state: dict, base: dict) -> tuple[dict, dict]:
    """Split a full state dict into ``(keys taken from the base, tensors to store)``.

    An own key is matched to the base key that has the longest common dotted suffix with it (after peft's wrapper
    names are removed, on both sides, so a LoRA model's ``...q_proj.base_layer.weight`` matches the base's
    ``...q_proj.weight`` or, over a LoRA base, its ``...q_proj.base_layer.weight``)
    and is taken from the base only when the two tensors are equal in dtype, shape and every value.
    """
    import torch

    by_suffix: dict[str, str | None] = {}
    for b in base:
        for form in {b, _plain(b)}:  # a base that is itself a LoRA model (adapter over adapter) matches plain too
            parts = form.split(".")
            for i in range(len(parts) - 1):
                s = ".".join(parts[i:])
                by_suffix[s] = None if s in by_suffix and by_suffix[s] != b else b
    keys, stored = {}, {}
    for k, v in state.items():
        parts = _plain(k).split(".")
        match = next(
            (by_suffix[s] for s in (".".join(parts[i:]) for i in range(len(parts) - 1)) if by_suffix.get(s)), None
        )
        t = base.get(match) if match else None
        if t is not None and t.dtype == v.dtype and t.shape == v.shape and torch.equal(t, v):
            keys[k] = match
        else:
            stored[k] = v
    return keys, stored


def split_for_package(state: dict, cfg: dict) -> tuple[dict | None, dict]:
    """``(base.yaml document, tensors to store)`` for a package of ``state``: over the pretrained base that
    ``cfg["model"]["arch"]`` names, or ``cfg["model"]["base"]`` for a method whose model key is ``base``
    (anchor-adapter), the tensors equal to the base's are named, not stored; ``(None, state)`` for any other model.

    Raises:
        DeltaError: the named base is a pretrained base that is not fetched.
    """
    from zoo.core import bases

    arch = bases.base_of(cfg)
    if arch is None:
        return None, state
    try:
        base = bases.base_state(arch)
    except bases.BaseError as e:
        raise DeltaError(str(e)) from None
    keys, stored = split_over_base(state, base)
    return {"base": arch, "base_sha256": bases.base_sha256(arch), "keys": keys}, stored
