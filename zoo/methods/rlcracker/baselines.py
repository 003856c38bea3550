"""Baseline attacks (issue #24): random token substitution, word swaps to MiniLM nearest neighbours, and the
unattacked / regenerated texts. The plain paraphraser is the stage-0 copier sampled (``rlcracker.copy``), scored
by ``experiments.py`` with the same sampler as the attacker. All take and return text; ours.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import torch

from zoo.methods.rlcracker.prompts import encode_plain

_WORD = re.compile(r"[A-Za-z]+")


def random_substitution(texts: Sequence[str], tokenizer, rate: float, generator: torch.Generator) -> list[str]:
    """Replace each token by a uniformly random id with probability ``rate`` (special ids < 3 excluded).

    Raises:
        ValueError: ``rate`` outside [0, 1].
    """
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must lie in [0, 1], got {rate}")
    out = []
    for t in texts:
        ids = torch.tensor(encode_plain(tokenizer, t), dtype=torch.long)
        if len(ids):
            swap = torch.rand(len(ids), generator=generator) < rate
            ids[swap] = torch.randint(3, len(tokenizer), (int(swap.sum()),), generator=generator)
        out.append(tokenizer.decode(ids.tolist()))
    return out


@functools.lru_cache(maxsize=4)
def _neighbours(vocabulary: tuple[str, ...]) -> dict[str, str]:
    """Each word's nearest other word of ``vocabulary`` by MiniLM cosine."""
    from zoo.models.text_embedding import embed_texts

    emb = embed_texts(list(vocabulary))
    sim = emb @ emb.T
    sim.fill_diagonal_(-2.0)
    best = sim.argmax(1).tolist()
    return {w: vocabulary[j] for w, j in zip(vocabulary, best)}


def minilm_swap(
    texts: Sequence[str], rate: float, generator: torch.Generator, vocabulary: Sequence[str] | None = None
) -> list[str]:
    """Replace each alphabetic word with probability ``rate`` by its MiniLM nearest neighbour among
    ``vocabulary`` (default: the lower-cased words of ``texts``), keeping a leading capital."""
    words = sorted({w.lower() for t in texts for w in _WORD.findall(t)} | set(vocabulary or ()))
    nn = _neighbours(tuple(words))

    def swap(m):
        w = m.group(0)
        if float(torch.rand((), generator=generator)) >= rate:
            return w
        new = nn.get(w.lower(), w)
        return new.capitalize() if w[0].isupper() else new

    return [_WORD.sub(swap, t) for t in texts]
