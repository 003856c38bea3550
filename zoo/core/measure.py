"""Wall time, CPU time and peak resident memory of one call (praxis' module and benchmark, the pooled-reps benchmark).

Peak memory is the growth of the process' resident set during the call: the kernel's high-water mark is reset to
the current RSS first (``/proc/self/clear_refs`` with ``5``, Linux >= 4.0), then ``VmHWM - VmRSS(before)`` is read
after. This counts C/C++ allocations too, so the three enumerators are measured the same way. Where the reset is
not available, ``tracemalloc``'s peak (Python and numpy allocations only) is reported instead.

The resident set also counts file-backed pages: library code the call runs for the first time in this process. A
forked child does not inherit its parent's page-table entries for file mappings, so even code the parent has already
run is faulted in again there (praxis on COMPAS d 3: 3.5 MiB of RSS growth, all of it file pages, 0.08 MiB
anonymous; a 300 KB numpy array: 1.5 MiB). ``file_mib`` is that growth of ``RssFile`` during the call (pages of files
still mapped when it returns: code stays mapped; a file the call maps and unmaps again is not seen), and
``private_peak_mib`` the peak less it: the call's own (anonymous) memory, what a warmed process would grow by.
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
    file_mib: float = 0.0

    @property
    def private_peak_mib(self) -> float:
        """Peak growth less the file-backed pages faulted in during the call (the call's own memory), MiB."""
        return max(0.0, self.peak_mib - self.file_mib)


def measure(fn: Callable[[], Any]) -> Measured:
    """Run ``fn()`` and measure it.

    CPU seconds are this process' user + system time during the call (``time.process_time``), which a machine
    shared with other work disturbs much less than wall time.
    """
    if _reset_hwm() and _status_kb("VmRSS") is not None:
        before, file_before = _status_kb("VmRSS"), _status_kb("RssFile")
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = max(0, _status_kb("VmHWM") - before) / 1024.0
        file_after = _status_kb("RssFile")
        file_mib = max(0, file_after - file_before) / 1024.0 if file_before is not None and file_after else 0.0
        return Measured(out, seconds, cpu, peak, "rss", min(file_mib, peak))
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = fn()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return Measured(out, seconds, cpu, peak / 2**20, "tracemalloc")
