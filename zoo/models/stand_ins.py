"""Same-family stand-ins for the paper recipes (``recipes/paper/``): tiny random models and small generated input
files, so every paper recipe runs a few steps on a CPU (``tests/platform/test_paper_recipes.py``) or a GPU
(``benchmarks/gpu_smoke.py``) with no download and none of the user's files.

Each paper recipe ``recipes/paper/NAME.yaml`` has an overlay ``recipes/paper/tiny/NAME.yaml`` that shrinks its
protocol and points the user's inputs at ``${oc.env:ZOO_STAND_INS}/KIND...``; :func:`prepare` reads which kinds an
overlay names, builds those under one folder and sets ``ZOO_STAND_INS`` to it. The kinds (:data:`BUILDERS`):

* ``llama2`` / ``llama3`` / ``qwen2`` / ``qwen3`` / ``gemma``: a 2-block random ``LlamaConfig`` / ``Qwen2Config`` /
  ``Qwen3Config`` / ``GemmaConfig`` causal LM (hidden 64) saved with a byte-level tokenizer of the same kind: BOS
  prepended for Llama (``<s>`` / ``<|begin_of_text|>``) and Gemma (``<bos>``), none for Qwen (as Qwen's own
  tokenizers), each with its family's chat template and end-of-turn token as EOS.
* ``vit-b-16.pt``: open_clip's ``ViT-B-16`` at random initialisation (ltc's backbone).
* ``sd`` (a diffusers ``UNet2DConditionModel`` + ``AutoencoderKL`` folder, 4x8x8 latents), ``dinov2`` (a
  transformers ``Dinov2Model``).
* data: ``math.jsonl``, ``math-bench.jsonl``, ``math-clean.jsonl`` (``{question, answer}``), ``math500.jsonl`` (``{prompt, reference}``), ``criteo.csv``,
  ``crh-pairs.csv``, ``pulse`` (embeddings and weights ``.npy``), ``images`` (class folders), ``waterbirds`` (images
  + ``metadata.csv``), ``coco`` (images + ``captions.csv``), ``trsp-carpool`` (the authors' three files).

Everything is seeded, so a kind built twice is the same bytes.

Kept as one module: one small builder per input kind, found by name through :func:`kinds`;
they share the seeded writers.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

ENV = "ZOO_STAND_INS"
"""The environment variable overlays name the stand-in folder by (``${oc.env:ZOO_STAND_INS}/qwen2``)."""

_REF = re.compile(r"\$\{oc\.env:" + ENV + r"\}/([\w.-]+)")

_CHATML = (
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}"
)
_QWEN3 = _CHATML.replace(
    "{{'<|im_start|>assistant\\n'}}",
    "{{'<|im_start|>assistant\\n'}}{% if enable_thinking is defined and not enable_thinking %}"
    "{{'<think>\\n\\n</think>\\n\\n'}}{% endif %}",
)
_LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}{{'<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + "
    "m['content'] + '<|eot_id|>'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|start_header_id|>assistant<|end_header_id|>\\n\\n'}}{% endif %}"
)
_LLAMA2 = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{'[INST] ' + m['content'] + ' [/INST]'}}"
    "{% else %}{{' ' + m['content'] + ' ' + eos_token}}{% endif %}{% endfor %}"
)
_GEMMA = (
    "{{ bos_token }}{% for m in messages %}{{'<start_of_turn>' + ('model' if m['role'] == 'assistant' else "
    "m['role']) + '\\n' + m['content'] + '<end_of_turn>\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)

#: family -> (config class, special tokens in id order, bos, eos, pad, chat template)
_FAMILIES = {
    "llama2": ("LlamaConfig", ["<unk>", "<s>", "</s>"], "<s>", "</s>", "</s>", _LLAMA2),
    "llama3": (
        "LlamaConfig",
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
        "<|begin_of_text|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        _LLAMA3,
    ),
    "qwen2": (
        "Qwen2Config",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        None,
        "<|im_end|>",
        "<|endoftext|>",
        _CHATML,
    ),
    "qwen3": (
        "Qwen3Config",
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
        None,
        "<|im_end|>",
        "<|endoftext|>",
        _QWEN3,
    ),
    "gemma": (
        "GemmaConfig",
        ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"],
        "<bos>",
        "<eos>",
        "<pad>",
        _GEMMA,
    ),
}


def tokenizer(family: str):
    """A byte-level tokenizer of ``family`` (:data:`_FAMILIES`): the family's special tokens first, then the 256
    byte symbols, then `` Yes``/`` yes``/`` No``/`` no`` as whole tokens; BOS prepended where the family does (never
    for Qwen).

    Returns:
        A ``PreTrainedTokenizerFast`` with ``bos/eos/pad`` set and the family's chat template.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    _, specials, bos, eos, pad, template = _FAMILIES[family]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate([*specials, *alphabet])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=pad, additional_special_tokens=specials
    )
    fast.chat_template = template
    fast.add_tokens([" Yes", " yes", " No", " no"])  # whole words, as in real vocabularies (an LM judge's answers)
    return fast


def causal_lm(folder: Path, family: str) -> Path:
    """A 2-block random causal LM of ``family`` (hidden 64, 4 heads, 2 KV heads, tied embeddings) and its tokenizer
    saved in ``folder`` (safetensors + config + tokenizer), as a user's local model directory would be."""
    import torch
    import transformers

    cls_name, *_ = _FAMILIES[family]
    tok = tokenizer(family)
    kwargs = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    config = getattr(transformers, cls_name)(**kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _lm(family: str) -> Callable[[Path], Path]:
    return lambda folder: causal_lm(folder, family)


def stable_diffusion_modules(seed: int = 0):
    """The ``sd`` stand-in's ``(AutoencoderKL, UNet2DConditionModel)``, built in memory with torch seed ``seed``:
    4x8x8 latents, 16x16 images, cross-attention (width 16; SD 2.1's is 1,024) in the first down and last up block,
    random weights."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel

    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        block_out_channels=(8, 8),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=16,
    )
    unet = UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        layers_per_block=1,
        cross_attention_dim=16,
        attention_head_dim=4,
        norm_num_groups=4,
    )
    return vae, unet


def stable_diffusion(folder: Path) -> Path:
    """A diffusers Stable Diffusion-shaped folder (``unet/``, ``vae/``) of :func:`stable_diffusion_modules` (seed 0)."""
    vae, unet = stable_diffusion_modules(0)
    vae.save_pretrained(folder / "vae")
    unet.save_pretrained(folder / "unet")
    return folder


def dinov2_model(seed: int = 0):
    """The ``dinov2`` stand-in's transformers ``Dinov2Model`` (hidden 16, one layer, patch 4, 16x16 images), built
    in memory with torch seed ``seed``, random weights."""
    import torch
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    cfg = Dinov2Config(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, patch_size=4, image_size=16
    )
    return Dinov2Model(cfg)


def dinov2(folder: Path) -> Path:
    """A transformers ``Dinov2Model`` folder of :func:`dinov2_model` (seed 0)."""
    dinov2_model(0).save_pretrained(folder)
    return folder


def open_clip_vit_b16(path: Path) -> Path:
    """open_clip's ``ViT-B-16`` CLIP (image tower, text tower) at random initialisation, its state dict saved as a
    local weights file that ``open_clip.create_model("ViT-B-16", pretrained=path)`` loads (fp16 on disk: 300 MB)."""
    import open_clip
    import torch

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-16")
    torch.save({k: v.half() for k, v in model.state_dict().items()}, path)
    return path


def _rng(seed: int = 0):
    import numpy as np

    return np.random.default_rng(seed)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def math_problems(path: Path, seed: int = 1, n: int = 64) -> Path:
    """``n`` ``{"question", "answer"}`` lines of three-term integer chains (anchor-adapter's user problem format)."""
    rng, rows = _rng(seed), []
    for _ in range(n):
        a, b, c = (int(v) for v in rng.integers(1, 50, 3))
        rows.append({"question": f"{a} + {b} - {c}", "answer": a + b - c})
    return _write_jsonl(path, rows)


def math500(path: Path) -> Path:
    """24 ``{"prompt", "reference"}`` lines: a problem and its worked solution (pooled-reps' user format)."""
    rng, rows = _rng(2), []
    for _ in range(24):
        a, b = (int(v) for v in rng.integers(2, 30, 2))
        rows.append(
            {"prompt": f"What is {a} times {b}?", "reference": f"{a} x {b} = {a * b}, so the answer is {a * b}."}
        )
    return _write_jsonl(path, rows)


def criteo(path: Path) -> Path:
    """A Criteo-shaped CSV: 600 rows of 6 numeric public features and ``SalesAmountInEuro`` in [0, 400]."""
    rng = _rng(3)
    x = rng.standard_normal((600, 6))
    y = (100 + 60 * x[:, 0] - 30 * x[:, 1] + 20 * rng.standard_normal(600)).clip(0, 400)
    lines = [",".join([f"f{i}" for i in range(6)] + ["SalesAmountInEuro"])]
    lines += [",".join(f"{v:.4f}" for v in [*row, t]) for row, t in zip(x, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def crh_pairs(path: Path) -> Path:
    """The authors' pairs CSV shape for the first three shipped concepts (ids 2, 5, 12), 10 questions each."""
    import csv

    concepts = {2: "C/C++ syntax", 5: "roots in mathematics", 12: "the concept twelve"}
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["qid", "cid", "question", "concept", "resp_no_concept", "resp_with_concept"])
        for cid, concept in concepts.items():
            for qid in range(10):
                reply = f"Here is an answer to question {qid}."
                w.writerow([qid, cid, f"Question number {qid}?", concept, reply, f"{reply} It mentions {concept}."])
    return path


def pulse(folder: Path) -> Path:
    """``embeddings.npy`` (256 x 32 float32, unit rows) and ``weights.npy`` (log(votes + comments)-like, 256)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = _rng(4)
    e = rng.standard_normal((256, 32)).astype(np.float32)
    np.save(folder / "embeddings.npy", e / np.linalg.norm(e, axis=1, keepdims=True))
    np.save(folder / "weights.npy", np.log1p(rng.integers(0, 200, 256)).astype(np.float32))
    return folder


def _png(path: Path, rng, size: int = 32, tint: tuple[int, int, int] = (128, 128, 128)) -> None:
    """A noisy image around the colour ``tint`` (so a classifier can tell tints apart after a few steps)."""
    import numpy as np
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.asarray(tint, float) + rng.normal(0, 40, (size, size, 3))
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path)


def images(folder: Path) -> Path:
    """Class folders ``<folder>/<class>/<n>.png`` (CIFAR/ImageNet layout): 10 classes x 40 noisy 32x32 RGB images,
    each class its own tint."""
    rng = _rng(5)
    for c in range(10):
        tint = tuple(int(v) for v in rng.integers(30, 226, 3))
        for i in range(40):
            _png(folder / f"class{c}" / f"{i}.png", rng, tint=tint)
    return folder


def waterbirds(folder: Path) -> Path:
    """A Waterbirds-format folder: 48 random images and ``metadata.csv`` (``img_filename, y, place, split``) with every
    (y, place) group in each split."""
    rng, rows = _rng(6), []
    for i in range(48):
        name = f"img/{i:03d}.png"
        _png(folder / name, rng)
        rows.append(f"{name},{(i // 2) % 2},{i % 2},{(i // 4) % 3}")
    (folder / "metadata.csv").write_text("img_filename,y,place,split\n" + "\n".join(rows) + "\n")
    return folder


def coco(folder: Path) -> Path:
    """A caption folder: 80 random images and ``captions.csv`` (``file, caption``), as COCO val2017 is read."""
    rng, rows = _rng(7), []
    colours = ["red", "green", "blue", "yellow"]
    for i in range(80):
        _png(folder / f"{i:03d}.png", rng)
        rows.append(f"{i:03d}.png,a {colours[i % 4]} object number {i}")
    (folder / "captions.csv").write_text("file,caption\n" + "\n".join(rows) + "\n")
    return folder


def trsp_carpool(folder: Path) -> Path:
    """The authors' carpooling files: 60 points on a plane (Euclidean seconds at walking 1.4 m/s and car 10 m/s, so
    both matrices are metric) and 40 routes between them."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = _rng(8)
    pts = rng.uniform(0, 3000, (60, 2))
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    np.savez(folder / "matrix_pedestrian_sec.npz", d / 1.4)
    np.savez(folder / "matrix_auto_sec.npz", d / 10.0)
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, 60, (60, 2)) if a != b][:40]
    (folder / "agents_routes.csv").write_text(
        "pickup_point_id,dropoff_point_id\n" + "".join(f"{a},{b}\n" for a, b in pairs)
    )
    return folder


BUILDERS: dict[str, Callable[[Path], Path]] = {
    **{family: _lm(family) for family in _FAMILIES},
    "sd": stable_diffusion,
    "dinov2": dinov2,
    "vit-b-16.pt": open_clip_vit_b16,
    "math.jsonl": math_problems,
    "math-bench.jsonl": lambda path: math_problems(path, seed=11, n=8),
    "math-clean.jsonl": lambda path: math_problems(path, seed=12, n=8),
    "math500.jsonl": math500,
    "criteo.csv": criteo,
    "crh-pairs.csv": crh_pairs,
    "pulse": pulse,
    "images": images,
    "waterbirds": waterbirds,
    "coco": coco,
    "trsp-carpool": trsp_carpool,
}
"""Stand-in kind -> builder writing it at the given path."""


def kinds(overlay: str | Path) -> list[str]:
    """The stand-in kinds an overlay file names (``${oc.env:ZOO_STAND_INS}/KIND``), in order of first use.

    Raises:
        KeyError: a kind with no builder (the message lists the known kinds).
    """
    found = list(dict.fromkeys(_REF.findall(Path(overlay).read_text(encoding="utf-8"))))
    unknown = [k for k in found if k not in BUILDERS]
    if unknown:
        raise KeyError(f"{overlay}: unknown stand-in {unknown}; known: {sorted(BUILDERS)}")
    return found


def build(root: Path, names: list[str]) -> Path:
    """Build the stand-ins ``names`` under ``root`` (each once: an existing one is kept). Returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (root / name).exists():
            tmp = root / f".{name}.partial"
            BUILDERS[name](tmp)
            tmp.rename(root / name)
    return root


def prepare(overlay: str | Path, root: Path) -> Path:
    """Build what ``overlay`` names under ``root`` and set ``$ZOO_STAND_INS`` to ``root`` (for the overlay's
    interpolations). Returns ``root``."""
    build(Path(root), kinds(overlay))
    os.environ[ENV] = str(root)
    return Path(root)
