"""``empty_weights()``: build modules on the meta device without reading or initialising weights.

Core code that rebuilds a module only to assign it gathered tensors next (``zoo.core.parallel.unsharded_copy``)
enters this context; builders of large pieces (``zoo.models.causal_lm.build_causal_lm``) ask
:func:`weights_are_empty` and then skip loading from disk. Core owns the switch so that it depends on no model code.
"""

from __future__ import annotations

import contextlib

_EMPTY = False


@contextlib.contextmanager
def empty_weights():
    """Within this context, builders that honour :func:`weights_are_empty` build the architecture on the meta
    device and read no weights (for a copy whose weights are assigned next: ``load_state_dict(state, assign=True)``;
    its non-persistent buffers, such as rotary frequencies, stay on the meta device until the caller fills them)."""
    global _EMPTY
    before, _EMPTY = _EMPTY, True
    try:
        yield
    finally:
        _EMPTY = before


def weights_are_empty() -> bool:
    """Whether the caller is inside :func:`empty_weights`."""
    return _EMPTY
