"""Negative destinations for temporal link prediction: collision-checked uniform draws (training, AP/AUC), TGB's
``hist_rnd`` (MRR) and the candidates of the inductive sampler (nodes unseen in training)."""

from __future__ import annotations

import torch


class CollisionCheckedNegatives:
    """Negative destinations that never coincide with a real interaction of the source at that time.

    The authors' ``sample_with_time_collision_check``: for ``(u, t)`` draw ``v'`` uniformly from
    ``candidates`` and reject it if ``u`` interacted with ``v'`` (in either direction) at exactly ``t``
    in the full stream. Rejected draws are redrawn (vectorised, at most ``max_rounds`` rounds).

    Args:
        candidates: int64 ``(C,)`` candidate node ids (unique train destinations for training, all
            destinations for evaluation, as in the code).
        src, dst, t: the full event stream (to know which triples are real).
    """

    def __init__(
        self, candidates: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor, max_rounds: int = 100
    ):
        self.candidates = torch.unique(candidates.long())
        self.times = torch.unique(t.double())
        self._n = int(torch.maximum(src.max(), dst.max())) + 1
        r = torch.searchsorted(self.times, t.double())
        a, b = src.long(), dst.long()
        keys = torch.cat([(a * self._n + b) * self.times.numel() + r, (b * self._n + a) * self.times.numel() + r])
        self.keys = torch.unique(keys)
        self.max_rounds = max_rounds

    def is_real(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Bool, same shape as ``src``: whether ``(src, dst, t)`` is an interaction of the stream."""
        r = torch.searchsorted(self.times, t.double())
        exact = (r < self.times.numel()) & (self.times[r.clamp(max=self.times.numel() - 1)] == t.double())
        key = (src.long() * self._n + dst.long()) * self.times.numel() + r
        pos = torch.searchsorted(self.keys, key).clamp(max=self.keys.numel() - 1)
        return exact & (self.keys[pos] == key)

    def sample(
        self, src: torch.Tensor, t: torch.Tensor, n: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``(B, n)`` int64 negatives for sources ``src`` ``(B,)`` at times ``t`` ``(B,)``.

        Raises:
            RuntimeError: a source collides with every candidate within ``max_rounds`` redraws.
        """
        s = src.long().unsqueeze(1).repeat(1, n)
        tt = t.double().unsqueeze(1).repeat(1, n)
        out = self.candidates[torch.randint(self.candidates.numel(), s.shape, generator=generator)]
        for _ in range(self.max_rounds):
            bad = self.is_real(s, out, tt)
            if not bad.any():
                return out
            out[bad] = self.candidates[torch.randint(self.candidates.numel(), (int(bad.sum()),), generator=generator)]
        raise RuntimeError("negative sampling: a source interacts with every candidate at its event time")


class HistoricalRandomNegatives:
    """TGB's ``hist_rnd`` evaluation negatives (Huang et al., NeurIPS 2023, ``NegativeEdgeGenerator``; *ours*).

    For a positive ``(u, v, t)`` and ``n`` negatives: ``min(⌊hist_ratio·n⌋, |H_u|)`` destinations drawn without
    replacement from ``H_u``, the destinations ``u`` sent to in the history (TGB: the training edges for
    validation, training + validation edges for test), then the rest drawn without replacement from all
    ``candidates`` not already chosen. Any ``(u, v', t)`` that is a real interaction of the stream (the positive
    itself included) is never a negative (``collisions.is_real``).

    Args:
        candidates: int64 ``(C,)`` candidate destinations.
        hist_src, hist_dst: int64 ``(H,)`` directed history edges.
        collisions: the stream's :class:`CollisionCheckedNegatives` (its ``is_real``).
        hist_ratio: fraction of historical negatives (TGB: 0.5).
    """

    def __init__(
        self,
        candidates: torch.Tensor,
        hist_src: torch.Tensor,
        hist_dst: torch.Tensor,
        collisions: CollisionCheckedNegatives,
        hist_ratio: float = 0.5,
        max_rounds: int = 200,
    ):
        if not 0 <= hist_ratio <= 1:
            raise ValueError(f"hist_ratio={hist_ratio} must be in [0, 1]")
        self.candidates = torch.unique(candidates.long())
        pairs = torch.unique(torch.stack([hist_src.long(), hist_dst.long()], 1), dim=0)  # sorted by (src, dst)
        self.hist_src, self.hist_dst = pairs[:, 0].contiguous(), pairs[:, 1].contiguous()
        self.collisions, self.hist_ratio, self.max_rounds = collisions, hist_ratio, max_rounds

    def _historical(self, src: torch.Tensor, t: torch.Tensor, n_hist: int, g: torch.Generator):
        """Up to ``n_hist`` distinct admissible historical destinations per source: ``((B, n_hist), count (B,))``."""
        lo = torch.searchsorted(self.hist_src, src, side="left")
        cnt = torch.searchsorted(self.hist_src, src, side="right") - lo
        ev = torch.repeat_interleave(torch.arange(src.numel()), cnt)
        pos = lo[ev] + torch.arange(ev.numel()) - (torch.cumsum(cnt, 0) - cnt)[ev]
        v = self.hist_dst[pos]
        ok = ~self.collisions.is_real(src[ev], v, t[ev])
        ev, v = ev[ok], v[ok]
        order = torch.argsort(torch.rand(ev.numel(), generator=g))  # random order, then stable by event
        order = order[torch.argsort(ev[order], stable=True)]
        ev, v = ev[order], v[order]
        first = torch.searchsorted(ev, torch.arange(src.numel()))
        rank = torch.arange(ev.numel()) - first[ev]
        take = rank < n_hist
        out = torch.zeros(src.numel(), n_hist, dtype=torch.long)
        out[ev[take], rank[take]] = v[take]
        return out, torch.bincount(ev[take], minlength=src.numel())

    def sample(
        self, src: torch.Tensor, t: torch.Tensor, n: int, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``(B, n)`` int64 distinct negatives for sources ``src`` ``(B,)`` at times ``t`` ``(B,)``; historical ones
        first (``count_b = min(⌊hist_ratio·n⌋, admissible history)`` of them), uniform ones after.

        Raises:
            RuntimeError: no ``n`` distinct admissible destinations found for some source in ``max_rounds`` redraws.
        """
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        src, t = src.long(), t.double()
        hist, k = self._historical(src, t, int(self.hist_ratio * n), g)
        out = self.candidates[torch.randint(self.candidates.numel(), (src.numel(), n), generator=g)]
        col = torch.arange(n).unsqueeze(0)
        is_hist = col < k.unsqueeze(1)
        out[:, : hist.shape[1]] = torch.where(is_hist[:, : hist.shape[1]], hist, out[:, : hist.shape[1]])
        s, tt = src.unsqueeze(1).expand(-1, n).contiguous(), t.unsqueeze(1).expand(-1, n).contiguous()
        for _ in range(self.max_rounds):
            earlier = torch.tril(torch.ones(n, n, dtype=torch.bool), -1)  # [j, i]: column i comes before j
            dup = ((out.unsqueeze(2) == out.unsqueeze(1)) & earlier).any(2)
            bad = ~is_hist & (dup | self.collisions.is_real(s, out, tt))
            if not bad.any():
                return out
            out[bad] = self.candidates[torch.randint(self.candidates.numel(), (int(bad.sum()),), generator=g)]
        u = int(src[bad.any(1)][0])
        raise RuntimeError(f"negative sampling: no {n} distinct admissible destinations for source {u}")


def unseen_nodes(src: torch.Tensor, dst: torch.Tensor, train: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """Nodes that occur in ``later`` events but in no ``train`` event: the candidates of the inductive sampler.

    Args:
        src, dst: int64 ``(E,)``; train, later: bool ``(E,)`` event masks.

    Returns:
        int64 sorted node ids.
    """
    seen = torch.zeros(int(torch.maximum(src.max(), dst.max())) + 1, dtype=torch.bool)
    seen[src[train]] = True
    seen[dst[train]] = True
    nodes = torch.unique(torch.cat([src[later], dst[later]]))
    return nodes[~seen[nodes]]
