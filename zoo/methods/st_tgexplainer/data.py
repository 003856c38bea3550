"""Temporal interaction graphs: reading, chronological/inductive splits, recent-K neighbours (negatives: ``negatives.py``).

Everything here is plain tensors/arrays so that the model, the TGN baseline and the tests share one
definition of "the past": a neighbour of event ``(u, v, t)`` is an interaction of ``u`` (or ``v``) with
timestamp **strictly smaller** than ``t`` (the authors' ``NeighborSamplerOrigin.find_neighbors_before``,
re-implemented vectorised with ``torch.searchsorted`` instead of a per-event Python loop).

Node ids are remapped to ``1..N`` in order of first appearance after sorting by time; ``0`` is padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import TemporalData

from zoo.core.constraints import INTEGER, NUMBER, DataFile
from zoo.core.data import DataError
from zoo.core.datafiles import read_declared

#: Column names of the two accepted layouts (see :func:`read_events`).
DYGLIB_COLUMNS = ("u", "i", "ts", "label", "idx")
SNAP_COLUMNS = ("src", "dst", "timestamp")


@dataclass
class TemporalGraph:
    """A chronologically sorted event stream.

    Attributes:
        data: ``TemporalData`` with ``src``, ``dst`` (int64, ``(E,)``, remapped ids in ``1..N``), ``t``
            (float64 ``(E,)``, the file's time unit, Unix seconds for the shipped data), ``msg``
            (float32 ``(E, F)`` edge features, ``F`` may be 0), ``label`` (float32 ``(E,)``).
        raw_node_ids: int64 ``(N + 1,)``; ``raw_node_ids[k]`` is the id in the file of remapped node ``k``
            (entry 0 is padding and holds -1).
        path: the file read.
    """

    data: TemporalData
    raw_node_ids: np.ndarray
    path: str

    @property
    def num_nodes(self) -> int:
        """N, the number of distinct nodes (padding excluded)."""
        return len(self.raw_node_ids) - 1

    def node_index(self, raw_id: int) -> int:
        """Remapped index of a node id as written in the file.

        Raises:
            KeyError: the id never occurs in the file.
        """
        hit = np.flatnonzero(self.raw_node_ids == int(raw_id))
        if hit.size == 0 or hit[0] == 0:
            raise KeyError(f"node id {raw_id} does not occur in {self.path}")
        return int(hit[0])


#: An interaction CSV (``data.path``) in either layout, checked before torch too (:func:`read_events`).
EVENTS = DataFile(
    "csv",
    layouts=(
        DataFile(
            "csv",
            DYGLIB_COLUMNS,
            types={"u": INTEGER, "i": INTEGER, "ts": NUMBER, "label": NUMBER, "*": NUMBER},
            ignore=("",),
        ),
        DataFile("csv", SNAP_COLUMNS, types={"src": INTEGER, "dst": INTEGER, "timestamp": NUMBER, "rating": NUMBER}),
    ),
)


def read_events(path: str | Path) -> TemporalGraph:
    """Read an interaction CSV in the DyGLib or the SNAP layout (declared as ``EVENTS``).

    Layouts (header row required):
        * DyGLib ``ml_<name>.csv``: ``u, i, ts, label, idx`` (an unnamed leading index column is ignored);
          every further column is a numeric edge feature.
        * SNAP, as shipped in ``data/temporal-graphs``: ``src, dst, timestamp`` and optionally ``rating``
          (Bitcoin; the label becomes ``rating > 0``).

    ``u``/``src`` and ``i``/``dst`` are integer node ids; ``ts``/``timestamp`` a finite number (any unit, the
    shipped files use Unix seconds). Rows are stably sorted by time.

    Returns:
        The :class:`TemporalGraph`.

    Raises:
        DataError: ``file:line: ...`` for a missing file, an unknown header, a row with the wrong number of
            fields, a non-integer node id or a non-numeric / non-finite time, label or feature; a file with
            fewer than two events.
    """
    path = Path(path)
    header, rows = read_declared(path, EVENTS)
    dyglib = all(c in header for c in DYGLIB_COLUMNS)
    s_col, d_col, t_col = ("u", "i", "ts") if dyglib else ("src", "dst", "timestamp")
    y_col = "label" if dyglib else ("rating" if "rating" in header else None)
    feat_cols = [h for h in header if h and h not in DYGLIB_COLUMNS] if dyglib else []
    src = [r[s_col] for _, r in rows]
    dst = [r[d_col] for _, r in rows]
    ts = [r[t_col] for _, r in rows]
    if y_col is None:
        lab = [0.0] * len(rows)
    else:
        lab = [float(r[y_col] > 0) if y_col == "rating" else r[y_col] for _, r in rows]
    feats = [[r[c] for c in feat_cols] for _, r in rows]
    if len(src) < 2:
        raise DataError(f"{path}: {len(src)} event(s); a temporal graph needs at least 2")
    order = np.argsort(np.asarray(ts, dtype=np.float64), kind="stable")
    src_raw = np.asarray(src, dtype=np.int64)[order]
    dst_raw = np.asarray(dst, dtype=np.int64)[order]
    # remap ids to 1..N in order of first appearance (src before dst within an event)
    both = np.stack([src_raw, dst_raw], 1).reshape(-1)
    uniq, first = np.unique(both, return_index=True)
    by_first = uniq[np.argsort(first)]
    lookup = {int(r): k + 1 for k, r in enumerate(by_first)}
    remap = np.vectorize(lookup.__getitem__, otypes=[np.int64])
    msg = np.asarray(feats, dtype=np.float32)[order] if feat_cols else np.zeros((len(src), 0), dtype=np.float32)
    data = TemporalData(
        src=torch.from_numpy(remap(src_raw)),
        dst=torch.from_numpy(remap(dst_raw)),
        t=torch.from_numpy(np.asarray(ts, dtype=np.float64)[order]),
        msg=torch.from_numpy(msg),
        label=torch.from_numpy(np.asarray(lab, dtype=np.float32)[order]),
    )
    raw = np.concatenate([[-1], by_first]).astype(np.int64)
    return TemporalGraph(data=data, raw_node_ids=raw, path=str(path))


@dataclass
class Split:
    """Boolean event masks of the chronological split (all ``(E,)`` bool tensors).

    ``train`` excludes events touching the held-out new nodes (DyGLib's inductive protocol); ``test`` is the
    transductive test set (all events after the 0.85 quantile); ``new_node_test`` its subset with at least one
    endpoint never seen in ``train`` (the inductive test set). ``val``/``new_node_val`` likewise.
    """

    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    new_node_val: torch.Tensor
    new_node_test: torch.Tensor
    val_time: float
    test_time: float


def chronological_split(
    data: TemporalData, val_ratio: float = 0.15, test_ratio: float = 0.15, new_node_ratio: float = 0.1, seed: int = 2020
) -> Split:
    """DyGLib's chronological 70/15/15 split with held-out new nodes.

    ``val_time, test_time`` are the ``1 - val - test`` and ``1 - test`` quantiles of the timestamps; a random
    ``new_node_ratio`` fraction of all nodes (drawn, with ``seed``, from nodes that occur after ``val_time``)
    is hidden from training: every training-period event touching one of them is dropped from ``train``.

    Raises:
        ValueError: ratios outside ``(0, 1)`` or summing to 1 or more.
    """
    if not (0 < val_ratio < 1 and 0 < test_ratio < 1 and val_ratio + test_ratio < 1 and 0 <= new_node_ratio < 1):
        raise ValueError(f"data: bad split ratios val={val_ratio} test={test_ratio} new_node={new_node_ratio}")
    t = data.t.double()
    val_time, test_time = torch.quantile(
        t, torch.tensor([1 - val_ratio - test_ratio, 1 - test_ratio], dtype=torch.float64)
    ).tolist()
    src, dst = data.src, data.dst
    num_nodes = int(torch.maximum(src.max(), dst.max()))
    later = t > val_time
    later_nodes = torch.unique(torch.cat([src[later], dst[later]]))
    g = torch.Generator().manual_seed(seed)
    n_new = min(int(new_node_ratio * num_nodes), later_nodes.numel())
    new_nodes = later_nodes[torch.randperm(later_nodes.numel(), generator=g)[:n_new]]
    is_new = torch.zeros(num_nodes + 1, dtype=torch.bool)
    is_new[new_nodes] = True
    train = (t <= val_time) & ~is_new[src] & ~is_new[dst]
    seen = torch.zeros(num_nodes + 1, dtype=torch.bool)
    seen[src[train]] = True
    seen[dst[train]] = True
    touches_unseen = ~seen[src] | ~seen[dst]
    val = (t > val_time) & (t <= test_time)
    test = t > test_time
    return Split(
        train=train,
        val=val,
        test=test,
        new_node_val=val & touches_unseen,
        new_node_test=test & touches_unseen,
        val_time=val_time,
        test_time=test_time,
    )


class RecentNeighborSampler:
    """The K most recent interactions of a node strictly before a query time (paper §3; code ``recent``).

    The history is undirected: event ``e = (u, v, t)`` is a neighbour ``v`` of ``u`` and ``u`` of ``v``.
    Entries are kept sorted by ``(node, time rank, event id)`` with a composite int64 key, so one
    ``torch.searchsorted`` finds, for every query at once, where the strictly-earlier history ends.

    Args:
        src, dst: int64 ``(E,)`` endpoint ids in ``1..N``.
        t: ``(E,)`` timestamps.
        eid: int64 ``(E,)`` global event ids (index into the full stream, used to fetch edge features and
            ground-truth flags).
        num_nodes: N.
    """

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor, eid: torch.Tensor, num_nodes: int):
        self.num_nodes = int(num_nodes)
        node = torch.cat([src, dst]).long()
        nbr = torch.cat([dst, src]).long()
        tt = torch.cat([t, t]).double()
        ee = torch.cat([eid, eid]).long()
        self.times = torch.unique(tt)  # sorted
        rank = torch.searchsorted(self.times, tt)
        self._stride = self.times.numel() + 1
        key = node * self._stride + rank
        by_eid = torch.argsort(ee, stable=True)
        order = by_eid[torch.argsort(key[by_eid], stable=True)]  # ties (same node and time) in event order
        self.key, self.nbr, self.t, self.eid = key[order], nbr[order], tt[order], ee[order]
        self.start = torch.searchsorted(self.key, torch.arange(self.num_nodes + 2, dtype=torch.long) * self._stride)

    def sample(self, nodes: torch.Tensor, times: torch.Tensor, k: int):
        """Most recent ``k`` interactions of each query node strictly before its query time.

        Args:
            nodes: int64 ``(...,)`` node ids (0 = padding query, returns nothing).
            times: ``(...,)`` query times (same unit as the stream).
            k: K, neighbours per query.

        Returns:
            ``(ids, t, eid, valid)``, each ``(..., k)``: neighbour ids (0 for padding), their interaction
            times (0 for padding), event ids (-1 for padding), a bool mask. Left-padded: the most recent
            interaction is in the last column.
        """
        shape = nodes.shape
        n = nodes.reshape(-1).long().clamp(0, self.num_nodes + 1)
        q = torch.searchsorted(self.times, times.reshape(-1).double(), side="left")  # ranks < q are earlier
        hi = torch.searchsorted(self.key, n * self._stride + q, side="left")
        lo = self.start[n]
        idx = hi.unsqueeze(1) - k + torch.arange(k)
        valid = (idx >= lo.unsqueeze(1)) & (n.unsqueeze(1) > 0)
        idx = idx.clamp(min=0, max=max(self.key.numel() - 1, 0))
        ids = torch.where(valid, self.nbr[idx], 0)
        tt = torch.where(valid, self.t[idx], 0.0)
        ee = torch.where(valid, self.eid[idx], -1)
        return (ids.view(*shape, k), tt.view(*shape, k), ee.view(*shape, k), valid.view(*shape, k))


def pair_seen_before(src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Ground-truth stability flag: did the unordered pair ``{u, v}`` interact at a strictly earlier time?

    Args:
        src, dst: int64 ``(E,)``; t: ``(E,)`` timestamps.

    Returns:
        bool ``(E,)``: ``True`` for a repeated (stability) interaction, ``False`` for a first-time
        (transition) one.
    """
    a, b = torch.minimum(src, dst).long(), torch.maximum(src, dst).long()
    pair = a * (int(b.max()) + 1) + b
    uniq, inv = torch.unique(pair, return_inverse=True)
    first = torch.full((uniq.numel(),), float("inf"), dtype=torch.float64)
    first = first.scatter_reduce(0, inv, t.double(), reduce="amin")
    return t.double() > first[inv]


def max_inter_event_gap(src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> float:
    """Δ, the largest gap between two consecutive interactions of one node (undirected), in time units.

    The recency feature of an endpoint is ``exp(-(t - t_last) / Δ)`` (code: ``max_time_shift``). The authors
    start every node's clock at time 0, which makes Δ the largest *timestamp* (≈1.1e9 s on Unix-time data,
    so the feature is constant ≈1); ours ignores each node's first interaction. Returns 1.0 when no node
    interacts twice.
    """
    node = torch.cat([src, dst]).long()
    tt = torch.cat([t, t]).double()
    order = torch.argsort(tt, stable=True)
    order = order[torch.argsort(node[order], stable=True)]
    node, tt = node[order], tt[order]
    same = node[1:] == node[:-1]
    gaps = (tt[1:] - tt[:-1])[same]
    return float(gaps.max()) if gaps.numel() and float(gaps.max()) > 0 else 1.0
