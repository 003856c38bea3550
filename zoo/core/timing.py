"""Fair side-by-side timing for benchmarks (issue #41): the shared loop behind the ratios of benchmarks/{trsp, desi,
cond_dp, crh, sf_consolidation, survshap_iq, threads, fast, pulse, overhead, watchlog --predict, ltc, saliency_bias,
sembind, zoo_lm, mad}.py, so that no script writes its own.

Fair by construction:

* **same threads** - torch (when imported) and the BLAS/OpenMP environment are set to ``threads`` for both sides
  before anything runs, and the setting is recorded;
* **warm-up excluded** - each side runs ``warmup`` times before any timed call, so numba/JIT compilation, caches,
  lazy imports and allocator growth land outside the timed region (:func:`compare` states this in ``describe``);
* **interleaved, alternating order** - repeat r runs every side once, in the given order when r is even and in
  reverse when r is odd, so background load and thermal drift hit all sides alike and no side always goes first;
* **medians** - per side, of wall (``perf_counter``) and CPU (``process_time``) seconds; ``ratio`` divides the peer's
  median by ours (> 1: ours faster, or ours smaller for any cost).

    from zoo.core.timing import compare
    t = compare({"ours": lambda: f(x), "peer": lambda: g(x)}, repeats=5, warmup=1)
    t.ratio("peer", "ours"), t.row("ours", "peer"), t.describe()

:func:`machine_load` words the load averages for a results file's notes (a shared 2-core machine's other jobs
inflate wall time, so every benchmark states the load it ran under).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_threads(threads: int) -> int:
    """Set torch's intra-op threads (if torch is imported) and the BLAS/OpenMP variables; returns ``threads``.

    The variables only reach libraries that have not started their thread pools yet, so benchmarks should also be
    launched with ``OMP_NUM_THREADS`` set; torch's setting takes effect at once.
    """
    if threads < 1:
        raise ValueError(f"threads: need >= 1, got {threads}")
    for var in THREAD_VARS:
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    return threads


def machine_load() -> str:
    """The 1-, 5- and 15-minute load averages now, the core count and the UTC time, as a phrase for notes:
    ``"load average 1.90, 1.17, 0.55 on 2 cores at 21:03 UTC"``."""
    loads = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"load average {loads} on {os.cpu_count()} cores at {datetime.now(UTC):%H:%M} UTC"


@dataclass
class Timing:
    """Result of :func:`compare`: per-side wall and CPU seconds of every timed call (in run order per side), the
    order each repeat ran in, the last output of every side, and the settings."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]
    orders: list[tuple[str, ...]]
    outputs: dict[str, Any] = field(repr=False)
    warmup: int
    threads: int | None

    def median(self, side: str, clock: str = "wall") -> float:
        """Median seconds of ``side`` on ``clock`` (``wall`` or ``cpu``)."""
        return statistics.median((self.wall if clock == "wall" else self.cpu)[side])

    def ratio(self, peer: str, ours: str, clock: str = "wall") -> float:
        """``median(peer) / median(ours)``: > 1 when ours is faster."""
        return self.median(peer, clock) / self.median(ours, clock)

    def describe(self) -> str:
        """One sentence stating how the figures were taken (for a results file's notes)."""
        n = len(self.orders)
        threads = f"{self.threads} thread(s) each side" if self.threads else "threads as launched"
        return (
            f"Medians of {n} interleaved repeats (side order alternating each repeat), after {self.warmup} "
            f"untimed warm-up call(s) per side (compilation and caches warmed outside the timed region); "
            f"{threads}."
        )

    def row(self, ours: str, peer: str, clock: str = "wall") -> dict:
        """Fields for a benchmark row: both medians on both clocks, the ratio on ``clock``, repeats and warm-up."""
        return {
            "ours_s": self.median(ours),
            "peer_s": self.median(peer),
            "ours_cpu_s": self.median(ours, "cpu"),
            "peer_cpu_s": self.median(peer, "cpu"),
            "ratio": self.ratio(peer, ours, clock),
            "ratio_clock": clock,
            "repeats": len(self.orders),
            "warmup": self.warmup,
        }


def compare(
    sides: dict[str, Callable[[], Any]],
    repeats: int = 5,
    warmup: int = 1,
    threads: int | None = 1,
    setup: Callable[[str], None] | None = None,
    clocks: tuple[Callable[[], float], Callable[[], float]] = (time.perf_counter, time.process_time),
) -> Timing:
    """Time several zero-argument callables side by side (module docstring for the protocol).

    Args:
        sides: name -> callable; the dict order is the order of even repeats.
        repeats: timed calls per side (>= 1).
        warmup: untimed calls per side before the first timed one (>= 0), also interleaved.
        threads: thread count set for every side (:func:`set_threads`); None leaves the process as launched.
        setup: optional ``setup(name)`` run untimed before each call of side ``name`` (fresh state, cache drops).
        clocks: ``(wall, cpu)`` clock functions; tests pass fakes.

    Returns:
        A :class:`Timing`.

    Raises:
        ValueError: fewer than one side, ``repeats < 1`` or ``warmup < 0``.
    """
    if not sides or repeats < 1 or warmup < 0:
        raise ValueError(f"compare: need >= 1 side, repeats >= 1, warmup >= 0; got {len(sides)}, {repeats}, {warmup}")
    if threads is not None:
        set_threads(threads)
    names = tuple(sides)
    wall_clock, cpu_clock = clocks
    wall = {s: [] for s in names}
    cpu = {s: [] for s in names}
    outputs: dict[str, Any] = {}
    orders = []
    for r in range(warmup + repeats):
        order = names if r % 2 == 0 else names[::-1]
        for s in order:
            if setup is not None:
                setup(s)
            w0, c0 = wall_clock(), cpu_clock()
            outputs[s] = sides[s]()
            w1, c1 = wall_clock(), cpu_clock()
            if r >= warmup:
                wall[s].append(w1 - w0)
                cpu[s].append(c1 - c0)
        if r >= warmup:
            orders.append(order)
    return Timing(wall, cpu, orders, outputs, warmup, threads)
