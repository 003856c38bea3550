"""Key-value-guided event images: every key owns a fixed rectangle of the canvas (WatchLog abstract; layout ours).

The abstract says events are rendered as "key-value-guided" images and ordered in time as a video. The paper's
rendering is not public. Ours (labelled *ours* in the method card):

* The canvas is ``height x width`` pixels (one channel, values in [0, 1]), cut into a ``rows x cols`` grid of
  equal slots. Slot ``i`` (row-major) always belongs to ``layout[i]``, in every frame of every window, so the pixel
  at (u, v) always refers to the same field. That is what makes the adapter's "same pixel across time" meaningful.
* A slot entry is one key or several alternatives ``"a|b"`` (the first key present in the event is drawn; e.g.
  Sysmon's acting process is ``image`` for most events and ``source_image`` for ProcessAccess). The entry
  ``*`` collects every key the layout does not name, drawn as ``key=value`` text, so a user's events with any keys
  still reach the model.
* A value is drawn as a hashed character-n-gram bitmap, not as glyphs: it is lower-cased, digit runs become ``0``,
  and its character trigrams (with ``^``/``$`` boundary marks), its path components and its basename are hashed with
  CRC-32 into the slot's pixels; a pixel's intensity is ``1 - exp(-count / 2)``. Equal values give equal pictures,
  similar values (same basename, shared path prefix) share pixels, and nothing depends on fonts or the platform.
  A tiny ViT trained from scratch on CPU cannot learn OCR in minutes; a pretrained video-LLM ViT at paper scale
  could read glyphs instead (see recipes/paper/).
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

#: Sysmon layout: 16 slots on a 4 x 4 grid (ours). Order = row-major slot index.
SYSMON_LAYOUT: tuple[str, ...] = (
    "event_id",
    "image|source_image",
    "command_line",
    "parent_image",
    "parent_command_line",
    "user",
    "integrity_level",
    "target_image",
    "granted_access",
    "call_trace",
    "target_object",
    "details|event_type",
    "image_loaded|signed",
    "target_filename",
    "destination_hostname|destination_ip|destination_port",
    "query_name|pipe_name|start_function|*",
)

#: Keys never drawn by ``*`` (identifiers and labels: they would leak the answer or make every frame unique).
RESERVED_KEYS: frozenset[str] = frozenset(
    {
        "label",
        "technique",
        "dataset",
        "utc_time",
        "host",
        "actor_guid",
        "process_guid",
        "process_id",
        "parent_process_guid",
        "source_process_guid",
        "target_process_guid",
    }
)

_DIGITS = re.compile(r"\d+")
_SPLIT = re.compile(r"[\\/\s|,;=]+")


def normalise_value(value: Any) -> str:
    """Canonical text of a value: JSON for containers, lower-case, digit runs replaced by ``0`` (ours).

    Args:
        value: any JSON value.

    Returns:
        The normalised string (``""`` for ``None``).
    """
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    return _DIGITS.sub("0", str(value).lower())


@lru_cache(maxsize=200_000)
def value_bins(text: str, n_bins: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Hashed features of a normalised value: which of the slot's ``n_bins`` pixels light up, and how often.

    Features (ours): character trigrams of ``^text$``, every path component (split on ``\\ / space | , ; =``) and
    the basename (last component), each hashed with CRC-32 of a type-prefixed string.

    Args:
        text: a string from :func:`normalise_value`.
        n_bins: pixels in the slot (``slot_h * slot_w``).

    Returns:
        ``(bins, counts)``: sorted distinct pixel indices in ``[0, n_bins)`` and their hit counts.
    """
    padded = f"^{text}$"
    feats = [f"c:{padded[i : i + 3]}" for i in range(max(1, len(padded) - 2))]
    parts = [p for p in _SPLIT.split(text) if p]
    feats += [f"p:{p}" for p in parts]
    if parts:
        feats += [f"b:{parts[-1]}"] * 2  # the basename counts double: it names the program / file
    hits: dict[int, int] = {}
    for f in feats:
        b = zlib.crc32(f.encode("utf-8")) % n_bins
        hits[b] = hits.get(b, 0) + 1
    bins = tuple(sorted(hits))
    return bins, tuple(hits[b] for b in bins)


@dataclass(frozen=True)
class EventRenderer:
    """Draws one event (a flat key-value dict) as a ``(height, width)`` float32 image in [0, 1].

    Args:
        layout: one entry per slot, row-major (see module docstring); ``len(layout) == rows * cols``.
        height, width: canvas size in pixels.
        rows, cols: slot grid; ``height % rows == 0`` and ``width % cols == 0``.

    Raises:
        ValueError: a layout whose length is not ``rows * cols``, a canvas not divisible by the grid, a key named
            in two slots, or more than one ``*``.
    """

    layout: tuple[str, ...] = SYSMON_LAYOUT
    height: int = 32
    width: int = 128
    rows: int = 4
    cols: int = 4

    def __post_init__(self):
        object.__setattr__(self, "layout", tuple(self.layout))
        if len(self.layout) != self.rows * self.cols:
            raise ValueError(
                f"layout has {len(self.layout)} entries, the {self.rows}x{self.cols} grid has "
                f"{self.rows * self.cols} slots"
            )
        if self.height % self.rows or self.width % self.cols:
            raise ValueError(f"canvas {self.height}x{self.width} is not divisible by the {self.rows}x{self.cols} grid")
        seen: dict[str, int] = {}
        for i, entry in enumerate(self.layout):
            for key in entry.split("|"):
                if key in seen:
                    raise ValueError(f"layout: key {key!r} is in slot {seen[key]} and slot {i}")
                seen[key] = i
        if sum(k == "*" for k in seen) > 1:
            raise ValueError("layout: '*' may appear once")

    @property
    def slot_shape(self) -> tuple[int, int]:
        """``(slot_h, slot_w)`` in pixels."""
        return self.height // self.rows, self.width // self.cols

    def slot_box(self, i: int) -> tuple[int, int, int, int]:
        """Pixel box ``(top, left, bottom, right)`` (bottom/right exclusive) of slot ``i``."""
        sh, sw = self.slot_shape
        r, c = divmod(i, self.cols)
        return r * sh, c * sw, (r + 1) * sh, (c + 1) * sw

    def slot_texts(self, event: dict[str, Any]) -> list[str | None]:
        """The normalised text drawn in each slot, ``None`` for an empty slot.

        Args:
            event: a flat dict (nested values are JSON-encoded).

        Returns:
            One entry per slot, in layout order.
        """
        named = {k for entry in self.layout for k in entry.split("|") if k != "*"}
        out: list[str | None] = []
        for entry in self.layout:
            text = None
            for key in entry.split("|"):
                if key == "*":
                    rest = [
                        f"{k}={normalise_value(v)}"
                        for k, v in sorted(event.items())
                        if k not in named and k not in RESERVED_KEYS and v is not None
                    ]
                    if rest:
                        text = " ".join(rest)
                        break
                elif event.get(key) is not None:
                    text = (
                        f"{normalise_value(event[key])}" if "|" not in entry else f"{key}={normalise_value(event[key])}"
                    )
                    break
            out.append(text)
        return out

    def pixel_hits(self, event: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Flat canvas indices lit by ``event`` and their hit counts (a sparse form of :meth:`render`).

        Returns:
            ``(idx, counts)``: int32 arrays of equal length; ``idx`` in ``[0, height * width)``.
        """
        sh, sw = self.slot_shape
        idx, cnt = [], []
        for i, text in enumerate(self.slot_texts(event)):
            if text is None:
                continue
            bins, counts = value_bins(text, sh * sw)
            top, left, _, _ = self.slot_box(i)
            b = np.asarray(bins, dtype=np.int32)
            idx.append((top + b // sw) * self.width + left + b % sw)
            cnt.append(np.asarray(counts, dtype=np.int32))
        if not idx:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        return np.concatenate(idx), np.concatenate(cnt)

    def image_from_hits(self, idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Dense ``(height, width)`` float32 image from :meth:`pixel_hits`: ``1 - exp(-count / 2)`` per pixel."""
        flat = np.zeros(self.height * self.width, dtype=np.float32)
        np.add.at(flat, idx, counts.astype(np.float32))
        return (1.0 - np.exp(-flat / 2.0)).reshape(self.height, self.width)

    def render(self, event: dict[str, Any]) -> np.ndarray:
        """The event's image, shape ``(height, width)``, float32 in [0, 1]; deterministic."""
        return self.image_from_hits(*self.pixel_hits(event))


def save_frames_png(
    frames: np.ndarray, renderer: EventRenderer, path: str, titles: Sequence[str] | None = None, cols: int = 4
) -> None:
    """Save frames ``(T, H, W)`` as one PNG: a grid of frames with the slot grid and key names drawn over the first.

    Args:
        frames: images in [0, 1].
        renderer: the renderer that drew them (for the slot grid and key names).
        path: output ``.png`` path (parent folders are created).
        titles: optional caption per frame.
        cols: frames per row of the grid.
    """
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(frames)
    grid_rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(
        grid_rows, min(cols, n), figsize=(3.2 * min(cols, n), 1.3 * grid_rows + 0.3), squeeze=False
    )
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k >= n:
            continue
        ax.imshow(frames[k], cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        for r in range(1, renderer.rows):
            ax.axhline(r * renderer.slot_shape[0] - 0.5, color="tab:blue", lw=0.4)
        for c in range(1, renderer.cols):
            ax.axvline(c * renderer.slot_shape[1] - 0.5, color="tab:blue", lw=0.4)
        if k == 0:
            for i, entry in enumerate(renderer.layout):
                top, left, _, _ = renderer.slot_box(i)
                ax.text(left + 0.5, top + 1.5, entry.split("|")[0][:14], fontsize=3.5, color="tab:red", va="top")
        if titles is not None:
            ax.set_title(titles[k], fontsize=5)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)
