"""Feature quality and steering (*ours*; the paper rates features with GPT-4o, §4.3, and steers with decoder rows,
§4.4).

* :func:`feature_quality`: of ``n_features`` random live features, the share whose top-5 contexts (16 tokens ending
  at the peak token, each from a different conversation) are more alike than random sets of 5 contexts: mean
  pairwise MiniLM cosine above the 95th percentile of random sets. Compare orderings across pipelines, not levels.
* :func:`steering_nll`: ``z' = z + α d_k`` (decoder row ``k`` in the LM's units) added at the read layer at every
  position; the mean NLL of held-out assistant replies per α.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.models.activations import steer
from zoo.models.chat import encode_chat

CONTEXT = 16


def _mean_pairwise_cosine(emb: torch.Tensor) -> torch.Tensor:
    """``[S, k, d]`` unit vectors -> ``[S]`` mean cosine over the ``k(k-1)/2`` pairs."""
    sim = emb @ emb.transpose(1, 2)
    k = emb.shape[1]
    return (sim.sum(dim=(1, 2)) - k) / (k * (k - 1))


def _context(tokenizer, seq: Sequence[int], pos: int) -> str:
    return tokenizer.decode(seq[max(0, pos - CONTEXT + 1) : pos + 1])


@torch.no_grad()
def random_coherence(
    ids: Sequence[Sequence[int]], tokenizer, n_sets: int = 300, top: int = 5, seed: int = 0
) -> torch.Tensor:
    """``[n_sets]`` mean pairwise MiniLM cosine of random sets of ``top`` contexts (uniform conversation, then
    uniform position): the null distribution of :func:`feature_quality`."""
    from zoo.models.text_embedding import embed_texts

    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([len(s) for s in ids])
    conv = torch.randint(len(ids), (n_sets * top,), generator=gen)
    pos = (torch.rand(n_sets * top, generator=gen) * lengths[conv]).long()
    emb = embed_texts([_context(tokenizer, ids[int(c)], int(p)) for c, p in zip(conv, pos)])
    return _mean_pairwise_cosine(emb.view(n_sets, top, -1))


@torch.no_grad()
def feature_quality(
    module,
    ids: Sequence[Sequence[int]],
    acts: Sequence[torch.Tensor],
    tokenizer,
    random: torch.Tensor,
    n_features: int = 128,
    top: int = 5,
    seed: int = 0,
) -> dict:
    """High-quality feature fraction of an SAE (see the module docstring).

    Args:
        module: a :class:`~zoo.methods.fast.module.FastSAEModule`. ids / acts: validation conversations (token ids
            and activations ``[len_i, D]`` at the SAE's layer), each run alone.
        random: the null coherences from :func:`random_coherence` on the same conversations.

    Returns:
        ``{"high_quality": fraction, "threshold": 95th percentile of random sets, "mean_coherence": mean over the
        features, "live": features peaking above 0 in at least ``top`` conversations}``.
    """
    from zoo.models.text_embedding import embed_texts

    maxima = [module.encode(a).max(dim=0) for a in acts]
    peak = torch.stack([m.values for m in maxima])  # [n_conv, d_sae]: each feature's peak per conversation
    where = torch.stack([m.indices for m in maxima])  # [n_conv, d_sae]: the position of that peak
    live = torch.nonzero((peak > 0).sum(0) >= top).flatten()
    chosen = live[torch.randperm(len(live), generator=torch.Generator().manual_seed(seed))[:n_features]]
    if len(chosen) == 0:
        return {
            "high_quality": 0.0,
            "threshold": float(torch.quantile(random, 0.95)),
            "mean_coherence": None,
            "live": 0.0,
        }
    texts = [
        _context(tokenizer, ids[c], int(where[c, k]))
        for k in chosen.tolist()
        for c in peak[:, k].topk(top).indices.tolist()
    ]
    feat = _mean_pairwise_cosine(embed_texts(texts).view(len(chosen), top, -1))
    threshold = float(torch.quantile(random, 0.95))
    return {
        "high_quality": float((feat > threshold).float().mean()),
        "threshold": threshold,
        "mean_coherence": float(feat.mean()),
        "live": float(len(live)),
    }


@torch.no_grad()
def assistant_feature(module, ids: Sequence[Sequence[int]], acts: Sequence[torch.Tensor], token_id: int) -> int:
    """The feature with the largest mean activation on the ``token_id`` positions (e.g. ``<|assistant|>``)."""
    rows = [module.encode(a[torch.tensor(s) == token_id]) for s, a in zip(ids, acts) if token_id in s]
    return int(torch.cat(rows).mean(0).argmax())


@torch.no_grad()
def steering_nll(
    module,
    model,
    tokenizer,
    conversations: Sequence[Sequence[dict]],
    feature: int,
    alphas: Sequence[float],
    max_length: int = 256,
) -> list[float]:
    """Mean NLL (nats per token) of the assistant tokens of ``conversations`` with ``α · d_feature`` added to the
    residual stream after block ``layer`` at every position, one value per α."""
    layer = int(module.hparams.layer)
    direction = module.sae.W_dec[feature] / module.act_scale  # the decoder row in the LM's units
    encoded = [encode_chat(tokenizer, c, max_length) for c in conversations]
    out = []
    for alpha in alphas:
        total, count = 0.0, 0
        for ex in encoded:
            ids, labels = torch.tensor([ex["input_ids"]]), torch.tensor([ex["labels"]])
            with steer(model, layer, alpha * direction):
                logits = model(input_ids=ids).logits[:, :-1]
            target = labels[:, 1:]
            total += float(
                torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100, reduction="sum"
                )
            )
            count += int((target != -100).sum())
        out.append(total / count)
    return out
