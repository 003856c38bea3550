"""A small CLIP built with open_clip (``open_clip.CLIP`` from our own config) and a caption-only vocabulary.

open_clip's BPE tokenizer (shipped inside the wheel) has 49,408 tokens; a CLIP trained on a few thousand captions
uses a few dozen of them. :class:`CaptionVocab` keeps only the token ids seen in a caption corpus and remaps them to
``0..V-1`` (0 = padding, the end-of-text token last so open_clip's ``argmax`` text pooling still finds it), which
shrinks the token embedding from 49,408 rows to V. Needs the ``clip`` extra (``pip install -e ".[clip]"``).
"""

from __future__ import annotations

import torch

SOT, EOT = 49406, 49407  # open_clip SimpleTokenizer's start/end-of-text ids


def _tokenizer(context_length: int):
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer(context_length=context_length)


class CaptionVocab:
    """A compact vocabulary over open_clip BPE ids.

    Args:
        ids: the kept open_clip ids (any order; SOT and EOT are added). Index 0 is padding.
        context_length: tokens per text (SOT + words + EOT, zero-padded).

    Raises:
        ValueError (from ``__call__``): a text with a token outside the vocabulary (the token named).
    """

    def __init__(self, ids: list[int], context_length: int = 16):
        kept = sorted({int(i) for i in ids} - {0, SOT, EOT})
        self.ids = [0] + kept + [SOT, EOT]
        self.index = {t: i for i, t in enumerate(self.ids)}
        self.context_length = context_length
        self._tok = _tokenizer(context_length)

    @classmethod
    def from_texts(cls, texts: list[str], context_length: int = 16) -> CaptionVocab:
        """The vocabulary of every BPE id in ``texts``."""
        tok = _tokenizer(context_length)
        ids = set()
        for t in texts:
            ids.update(tok.encode(t))
        return cls(sorted(ids), context_length)

    def with_texts(self, texts: list[str]) -> CaptionVocab:
        """This vocabulary plus every BPE id of ``texts`` it lacks (``self`` when none is new)."""
        new = {e for t in texts for e in self._tok.encode(t)} - set(self.index)
        return CaptionVocab(self.ids + sorted(new), self.context_length) if new else self

    def __len__(self) -> int:
        return len(self.ids)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        """``texts`` -> int64 ``(len(texts), context_length)`` compact ids.

        Raises:
            ValueError: an out-of-vocabulary token, or a text longer than ``context_length - 2`` tokens.
        """
        out = torch.zeros(len(texts), self.context_length, dtype=torch.long)
        for i, t in enumerate(texts):
            enc = self._tok.encode(t)
            if len(enc) > self.context_length - 2:
                raise ValueError(
                    f"text {t!r}: {len(enc)} tokens, context_length {self.context_length} allows "
                    f"{self.context_length - 2}"
                )
            missing = [self._tok.decode([e]) for e in enc if e not in self.index]
            if missing:
                raise ValueError(f"text {t!r}: token(s) {missing} not in the caption vocabulary")
            row = [self.index[SOT]] + [self.index[e] for e in enc] + [self.index[EOT]]
            out[i, : len(row)] = torch.tensor(row)
        return out


def build_clip(
    vocab_size: int,
    context_length: int = 16,
    embed_dim: int = 128,
    image_size: int = 48,
    patch_size: int = 8,
    vision_layers: int = 6,
    vision_width: int = 128,
    vision_heads: int = 4,
    text_layers: int = 2,
    text_width: int = 128,
    text_heads: int = 4,
):
    """An ``open_clip.CLIP`` from our own config (pre-LN ViT with a CLS token and ``nn.MultiheadAttention``).

    Shapes: ``encode_image (B, 3, image_size, image_size) -> (B, embed_dim)``,
    ``encode_text (B, context_length) -> (B, embed_dim)``.
    """
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

    vision = CLIPVisionCfg(
        layers=vision_layers,
        width=vision_width,
        head_width=vision_width // vision_heads,
        patch_size=patch_size,
        image_size=image_size,
    )
    text = CLIPTextCfg(
        context_length=context_length, vocab_size=vocab_size, width=text_width, heads=text_heads, layers=text_layers
    )
    return CLIP(embed_dim=embed_dim, vision_cfg=vision, text_cfg=text)
