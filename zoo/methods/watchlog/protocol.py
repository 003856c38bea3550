"""The shared protocol of WatchLog's experiment tables (ours): the windows, where weights go, ``data.*`` overrides and
the results writer. ``detection.py`` and ``explanations.py`` hold the tables; ``experiments.py`` is their command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from zoo.core.data import repo_root
from zoo.core.results import write_result
from zoo.methods.watchlog.datamodule import WatchLogDataModule

WINDOW = 16
TOKEN_LEN = 48
PAPER = {
    "note": "only the abstract is public: 'consistently outperforms state-of-the-art in accuracy and recall, "
    "significantly improved inference efficiency'; no numbers, no Sysmon/Mordor results "
    "(papers-1.md §1)"
}


def out_dir() -> Path:
    """Where experiment weights go (git-ignored)."""
    d = repo_root() / "runs" / "watchlog-experiments"
    d.mkdir(parents=True, exist_ok=True)
    return d


def slug(name: str) -> str:
    """File-name form of a setting name."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").replace("__", "_")


def data_overrides(tokens: Sequence[str]) -> dict:
    """``data.key=value`` tokens (OmegaConf dot-list syntax: ``data.path=my.jsonl``, ``data.split=[0.8,0.1]``) as
    keyword arguments of :class:`WatchLogDataModule`.

    Raises:
        ValueError: a token that does not start with ``data.`` or has no ``=``.
    """
    from omegaconf import OmegaConf

    bad = [t for t in tokens if not t.startswith("data.") or "=" not in t]
    if bad:
        raise ValueError(f"expected data.KEY=VALUE overrides, got {bad}")
    return OmegaConf.to_container(OmegaConf.from_dotlist(list(tokens))).get("data", {}) if tokens else {}


def datamodule(batch_size: int = 32, **overrides) -> WatchLogDataModule:
    """The shared windows: 16 events per host, recording split seed 0 (de-duplicated across splits), tokens built
    for the token baseline; ``overrides`` (from :func:`data_overrides`, or ``token_len=0`` when no token model is
    trained) replace any data argument (``path`` ...)."""
    kw = {"window": WINDOW, "token_len": TOKEN_LEN, "batch_size": batch_size, **overrides}
    dm = WatchLogDataModule(**kw)
    dm.setup()
    return dm


def write(rows: list[dict], experiment: str, command: str, extra: dict | None = None, **kw) -> Path:
    """Write ``results/watchlog/<experiment>.json`` through :func:`zoo.core.results.write_result`; ``extra`` may hold
    ``notes`` (the protocol) and further keys (``data``); ``kw`` goes to ``write_result`` (``summary``, ``kind``)."""
    extra = dict(extra or {})
    notes = extra.pop("notes", None)
    return write_result(
        "watchlog", experiment, rows, paper=PAPER, notes=notes, command=command, extra=extra or None, **kw
    )
