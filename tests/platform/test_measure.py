"""``zoo.core.measure``: the peak counts the call's own allocations, and file-backed pages it faults in (code, mapped
files still mapped when it returns) are reported apart (``file_mib``) and left out of ``private_peak_mib``."""

import mmap
import subprocess
import sys

import numpy as np
import pytest

from zoo.core.data import repo_root
from zoo.core.measure import measure

MIB = 2**20


def _needs_rss(m):
    if m.how != "rss":
        pytest.skip("no /proc/self/clear_refs here: tracemalloc's peak has no file pages to separate")


def test_own_allocation_counts_as_private_memory():
    # In a fresh interpreter: late in a full test run the allocation can come from memory the process has already
    # freed and still holds (resident), and the call then grows nothing (a 20 MiB block read 0.0 MiB in CI).
    code = (
        "import numpy as np; from zoo.core.measure import measure; "
        "m = measure(lambda: float(np.ones(20 * 2**20 // 8).sum())); "
        "print(m.how, m.result, m.private_peak_mib, m.peak_mib, m.file_mib)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo_root())
    how, result, private, peak, file_mib = out.stdout.split()
    if how != "rss":
        pytest.skip("no /proc/self/clear_refs here: tracemalloc's peak has no file pages to separate")
    assert float(result) == 20 * MIB // 8
    assert 19 <= float(private) <= float(peak) < 40
    assert float(file_mib) < 2


def test_file_pages_read_during_the_call_are_not_private(tmp_path):
    f = tmp_path / "blob"
    f.write_bytes(np.random.default_rng(0).integers(0, 255, 16 * MIB, dtype=np.uint8).tobytes())

    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:  # mapped, not yet read
        m = measure(lambda: sum(mm[i] for i in range(0, len(mm), 4096)))  # the call faults every page in
    _needs_rss(m)
    assert m.peak_mib >= 15 and m.file_mib >= 15
    assert m.private_peak_mib < 2
