"""Wall time and peak resident memory of one call (ours; used by the module and the benchmark).

Peak memory is the growth of the process' resident set during the call: the kernel's high-water mark is reset to
the current RSS first (``/proc/self/clear_refs`` with ``5``, Linux >= 4.0), then ``VmHWM - VmRSS(before)`` is read
after. This counts C/C++ allocations too, so the three enumerators are measured the same way. Where the reset is
not available, ``tracemalloc``'s peak (Python and numpy allocations only) is reported instead.
"""
from __future__ import annotations

import time
import tracemalloc
from typing import Any, Callable


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


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float, str]:
    """Run ``fn()``.

    Returns:
        ``(result, seconds, peak_mib, how)`` where ``how`` is ``"rss"`` or ``"tracemalloc"``.
    """
    if _reset_hwm() and _status_kb("VmRSS") is not None:
        before = _status_kb("VmRSS")
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
        return out, seconds, max(0, _status_kb("VmHWM") - before) / 1024.0, "rss"
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn()
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, seconds, peak / 2**20, "tracemalloc"
