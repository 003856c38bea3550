"""Small instances for the trsp tests: Euclidean, clustered Euclidean, shortest paths on random graphs."""

import numpy as np
from scipy.sparse.csgraph import shortest_path

from zoo.methods.trsp.costs import Instance


def euclid(n: int, m: int, seed: int, shuttle: float = 0.3, clustered: bool = False) -> Instance:
    """Walking = Euclidean in the plane, shuttle = ``shuttle`` x Euclidean between candidates."""
    rng = np.random.default_rng(seed)
    if clustered:
        centres = rng.random((3, 2)) * 10
        spread = rng.random() * 2
        a = centres[rng.integers(3, size=n)] + rng.normal(size=(n, 2)) * spread
        b = centres[rng.integers(3, size=n)] + rng.normal(size=(n, 2)) * spread
        c = centres[rng.integers(3, size=m)] + rng.normal(size=(m, 2)) * 2
    else:
        a, b, c = rng.random((n, 2)), rng.random((n, 2)), rng.random((m, 2))
    D = lambda p, q: np.linalg.norm(p[:, None] - q[None], axis=2)
    return Instance(D(a, c), D(c, b).T, shuttle * D(c, c), np.linalg.norm(a - b, axis=1))


def graph(n: int, m: int, seed: int, nodes: int = 30) -> Instance:
    """Shortest-path walking metric on a random weighted graph; shuttle = 0.5 x shortest path of a second graph."""
    rng = np.random.default_rng(seed)

    def metric():
        W = np.where(rng.random((nodes, nodes)) < 0.15, rng.random((nodes, nodes)) * 10, 0)
        W = np.triu(W, 1)
        W[np.arange(nodes - 1), np.arange(1, nodes)] = rng.random(nodes - 1) * 10 + 0.1  # connected path
        return shortest_path(W + W.T, directed=False)

    D, Ds = metric(), 0.5 * metric()
    a, b = rng.integers(nodes, size=n), rng.integers(nodes, size=n)
    c = rng.choice(nodes, size=m, replace=False)
    return Instance(D[np.ix_(a, c)], D[np.ix_(c, b)].T, Ds[np.ix_(c, c)], D[a, b])
