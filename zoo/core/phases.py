"""Set-up that says what it is doing: :func:`phase` logs one line when a phase of the set-up begins (loading weights,
reading and tokenising data, the method's own set-up before step 0) and, when it took longer than
:data:`SLOW_S`, one with its time when it ends, so a run is never silent for minutes before its first step.
Torch-free (``zoo predict`` and ``zoo eval`` use it before torch is imported).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager

log = logging.getLogger("zoo")

#: A phase that took longer than this (seconds) also logs its time when it ends.
SLOW_S = 3.0


@contextmanager
def phase(what: str):
    """Log ``what ...`` now and ``what: 12.3 s`` at the end when it took over :data:`SLOW_S` (INFO, ``zoo`` logger).

    ``what`` names the phase as a user reads it: ``"loading init_from zoo-lm.chat"``."""
    log.info("%s ...", what)
    start = time.perf_counter()
    yield
    if (seconds := time.perf_counter() - start) > SLOW_S:
        log.info("%s: %.1f s", what, seconds)
