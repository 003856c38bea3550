"""One call from data to the approximate Rashomon set: proxy reference, bound, CONSTRUCT (PRAXIS §3)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from zoo.methods.praxis.construct import OrNode, construct, rashomon_bound
from zoo.methods.praxis.enumerate import count_trees, count_within_mult, histogram
from zoo.methods.praxis.kernel import INF
from zoo.methods.praxis.kernel import available as kernel_available
from zoo.methods.praxis.problem import Problem, make_problem
from zoo.methods.praxis.proxy import proxy


def resolve_backend(backend: str) -> str:
    """``"auto"`` -> ``"numba"`` when numba imports, else ``"numpy"``; checks an explicit choice.

    Raises:
        ValueError: not one of auto/numba/numpy, or ``"numba"`` without numba (``pip install -e ".[praxis]"``).
    """
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be auto, numba or numpy, got {backend!r}")
    if backend == "numpy":
        return backend
    if kernel_available():
        return "numba"
    if backend == "numba":
        raise ValueError('backend="numba" needs numba: pip install -e ".[praxis]"')
    return "numpy"


@dataclass
class RashomonSet:
    """The result of ``fit_rashomon``.

    Attributes:
        problem: the packed data and proxy cache. root: root OR node of the AND/OR graph.
        depth: depth budget (PRAXIS convention: a root-only tree has depth 0).
        reference: ``Proxy(D, depth)`` (or ``None`` with a user budget). bound: the absolute budget ``eps_abs``.
        construct_seconds: wall time of the graph construction (proxy included).
        n_or_nodes: distinct OR nodes built (size of the subproblem cache).
        eps: the Rashomon multiplier the set was built with.
    """

    problem: Problem
    root: OrNode
    depth: int
    reference: int | None
    bound: int
    construct_seconds: float
    n_or_nodes: int
    eps: float = 0.0

    @property
    def n_trees(self) -> int:
        return count_trees(self.root)

    @property
    def min_objective(self) -> int:
        """Best objective found (integer units); ``INF`` when the set is empty."""
        return int(self.root.min_objective) if self.root.min_objective < INF else INF

    @property
    def n_within_best(self) -> int:
        """Trees of the set with objective ``<= round((1 + eps) * min_objective)``: the Rashomon set relative to the
        best tree found. ``n_trees`` counts what was enumerated, all trees within the proxy bound
        ``round((1 + eps)(1 + slack) Proxy)``, which is at least as large since ``min_objective <= Proxy``."""
        return count_within_mult(self.root, self.eps)

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        return histogram(self.root)


def fit_rashomon(
    X: np.ndarray,
    y: np.ndarray,
    lam: float,
    depth: int,
    eps: float,
    lookahead_k: int = 1,
    slack: float = 0.0,
    root_budget: int | None = None,
    majority_leaf_only: bool = False,
    backend: str = "auto",
) -> RashomonSet:
    """Build the PRAXIS approximation of ``{t : depth(t) <= depth, Obj(t) <= eps_abs}``.

    Args:
        X: ``(n, F)`` 0/1 features. y: ``(n,)`` labels ``0..C-1``.
        lam: per-leaf penalty ``lambda`` (``gamma = round(lambda * n)``).
        depth: depth budget, PRAXIS convention (TreeFARMS' ``depth_budget`` is this + 1).
        eps: Rashomon multiplier; ``eps_abs = round((1 + eps)(1 + slack) Proxy(D, depth))`` unless ``root_budget``.
        lookahead_k: proxy lookahead (``-1`` leaf, ``0`` greedy, ``1`` LicketySPLIT, ``>= depth - 1`` exact).
        slack: extra multiplicative slack on the reference.
        root_budget: an absolute budget in integer units, replacing the proxy-based one.
        majority_leaf_only: keep only majority-class leaves.
        backend: ``"numba"`` (compiled depth-2 OR nodes, ``kernel.py``), ``"numpy"`` (the reference), or ``"auto"``
            (numba when installed). Both give the same set.

    Raises:
        ValueError: bad data (see ``make_problem``), ``depth < 0``, ``eps < 0``, an unknown or missing backend.
    """
    if depth < 0 or eps < 0:
        raise ValueError(f"need depth >= 0 and eps >= 0, got depth={depth}, eps={eps}")
    t0 = time.perf_counter()
    p = make_problem(X, y, lam, lookahead_k)
    p.backend = resolve_backend(backend)
    root_mask = p.root
    if root_budget is None:
        if lookahead_k < 0:
            reference = int(proxy(Problem(p.X, p.notX, p.Y, p.n, p.gamma, 0), root_mask[None], depth)[0])
        else:
            reference = int(proxy(p, root_mask[None], depth)[0])
        bound = rashomon_bound(reference, eps, slack)
    else:
        reference, bound = None, int(root_budget)
    cache: dict = {}
    root = construct(p, root_mask, depth, bound, cache, majority_leaf_only)
    return RashomonSet(p, root, depth, reference, bound, time.perf_counter() - t0, len(cache), eps)
