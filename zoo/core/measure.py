"""Wall time, CPU time and peak resident memory of one call (praxis' module and benchmark, the pooled-reps benchmark).

Peak memory is the growth of the process' resident set during the call: the kernel's high-water mark is reset to
the current RSS first (``/proc/self/clear_refs`` with ``5``, Linux >= 4.0), then ``VmHWM - VmRSS(before)`` is read
after. This counts C/C++ allocations too, so the three enumerators are measured the same way. Where the reset is
not available, ``tracemalloc``'s peak (Python and numpy allocations only) is reported instead.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class Measured:
    """What ``measure`` returns: the call's result, wall and CPU seconds, peak memory growth (MiB) and its source."""

    result: Any
    seconds: float
    cpu_seconds: float
    peak_mib: float
    how: str


def measure(fn: Callable[[], Any]) -> Measured:
    """Run ``fn()`` and measure it.

    CPU seconds are this process' user + system time during the call (``time.process_time``), which a machine
    shared with other work disturbs much less than wall time.
    """
    if _reset_hwm() and _status_kb("VmRSS") is not None:
        before = _status_kb("VmRSS")
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        return Measured(out, seconds, cpu, max(0, _status_kb("VmHWM") - before) / 1024.0, "rss")
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = fn()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return Measured(out, seconds, cpu, peak / 2**20, "tracemalloc")
