"""FAST's evaluation metrics: eq. 7 MSE and MSE_st (reported as log₂), Delta loss and GSNR (both *ours*: the paper's
ICML abstract names them without a definition), and feature statistics."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from zoo.models.activations import steer


def eq7_mse(sq_err: torch.Tensor, seq_index: torch.Tensor, hidden_size: int, mask: torch.Tensor | None = None) -> float:
    """Eq. 7: ``MSE = 1/(N·H) Σ_i 1/L_i Σ_j Σ_k (y_ijk − ŷ_ijk)²`` — each sequence's mean over its tokens, then the
    mean over the N sequences, per hidden dimension. With ``mask`` only the selected tokens count (MSE_st: the
    chat-template tokens), and sequences with no selected token are left out of N.

    Args:
        sq_err: ``[n_tokens]`` squared error summed over the hidden dimension, ``Σ_k (y − ŷ)²``.
        seq_index: ``[n_tokens]`` which sequence each token belongs to.
        hidden_size: H.
        mask: ``[n_tokens]`` bool, tokens to keep (``None``: all).

    Returns:
        The MSE (not the log); NaN when no token is selected.
    """
    if mask is not None:
        sq_err, seq_index = sq_err[mask], seq_index[mask]
    if sq_err.numel() == 0:
        return float("nan")
    _, inverse = torch.unique(seq_index, return_inverse=True)
    n = int(inverse.max()) + 1
    sums = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse, sq_err.double())
    counts = torch.zeros(n, dtype=torch.float64).index_add_(0, inverse, torch.ones_like(sq_err, dtype=torch.float64))
    return float((sums / counts).mean() / hidden_size)


POSITION_EDGES = [0, 1, 2, 4, 8, 16, 32, 64, 128, 257]
"""Token-position bins of :func:`error_by_position` in the experiments and their plots (bin ``b`` is
``[edges[b], edges[b+1])``; 257 closes the last bin past the 256-token sequences)."""


def error_by_position(
    sq_err: torch.Tensor, position: torch.Tensor, hidden_size: int, edges: Sequence[int]
) -> list[float | None]:
    """Mean squared error per hidden dimension of the tokens whose position falls in ``[edges[b], edges[b+1])``
    (``None`` for an empty bin)."""
    out = []
    for lo, hi in itertools.pairwise(edges):
        sel = (position >= lo) & (position < hi)
        out.append(float(sq_err[sel].double().mean() / hidden_size) if bool(sel.any()) else None)
    return out


def dead_dense(freq: torch.Tensor, dense_above: float = 0.1) -> tuple[float, float]:
    """Fractions of features never active (dead) and active on more than ``dense_above`` of tokens (dense)."""
    return float((freq == 0).float().mean()), float((freq > dense_above).float().mean())


@torch.no_grad()
def next_token_ce(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[float, int]:
    """Summed next-token cross-entropy (nats) over real positions of a right-padded batch, and the target count."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    targets = input_ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, -100)
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, reduction="sum"
    )
    return float(ce), int((targets != -100).sum())


@torch.no_grad()
def delta_loss(
    model,
    read_view,
    layer: int,
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    reconstruct: Callable[[torch.Tensor], torch.Tensor],
    base_ce: float | None = None,
) -> tuple[float, float, float]:
    """Delta loss (*ours*): ``100 · (CE_spliced − CE) / CE`` in percent, where CE is the LM's mean next-token
    cross-entropy and CE_spliced the same with block ``layer``'s output replaced by the SAE reconstruction.

    The splice adds ``x̂ − x`` at the read layer with :func:`zoo.models.activations.steer` (a ``[B, T, D]`` vector),
    ``x`` read by ``residual_stream`` on ``read_view`` (:func:`zoo.methods.fast.pipelines.truncated_lm`).

    Args:
        batches: ``(input_ids [B, T], attention_mask [B, T])`` pairs, right-padded.
        reconstruct: ``x [B, T, D] -> x̂ [B, T, D]`` (the SAE in the LM's units).
        base_ce: the LM's own mean CE on these batches, when already known (a grid of SAEs on one LM); ``None``:
            computed here.

    Returns:
        ``(ce, ce_spliced, delta_percent)``.
    """
    from zoo.models.activations import residual_stream

    base = spliced = 0.0
    count = 0
    for ids, mask in batches:
        ce = next_token_ce(model, ids, mask)[0] if base_ce is None else 0.0
        x = residual_stream(read_view, ids, mask, layers=[layer])[layer]
        with steer(model, layer, reconstruct(x) - x):
            ce_s, n = next_token_ce(model, ids, mask)
        base, spliced, count = base + ce, spliced + ce_s, count + n
    base, spliced = (base / count if base_ce is None else base_ce), spliced / count
    return base, spliced, 100.0 * (spliced - base) / base


def gsnr(gradients: torch.Tensor) -> float:
    """Gradient signal-to-noise ratio (*ours*, after Liu et al. 2020): per parameter ``E[g]² / Var[g]`` over
    minibatches (``Var`` with ddof 1), then the median over the parameters whose variance is positive.

    Args:
        gradients: ``[n_minibatches, n_parameters]``.
    """
    mean, var = gradients.double().mean(dim=0), gradients.double().var(dim=0)
    keep = var > 0
    return float((mean[keep] ** 2 / var[keep]).median())
