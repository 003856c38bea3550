"""A bad value inside a user's data file fails before torch (#42): for each method that reads a user's file, a small
file with one bad cell (not a number, out of range, not an integer, a missing image, a chat turn with an unknown role)
is refused by ``python train.py`` with exit 2 and ``file:line: column/key ...`` (and the recipe key), torch never
imported and no run directory made; and the method's own reader, given the same file, refuses it with the same
message (one declaration, :class:`zoo.core.constraints.DataFile`, read by :func:`zoo.core.datafiles.read_declared`)."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.core.data import DataError


def _load_event_log(events: str, labels: str):
    """watchlog's reader of an events file with its labels CSV (the labels are the file under test)."""
    from zoo.methods.watchlog.windows import load_event_log

    return load_event_log(events, labels)


PAIRS = "qid,cid,question,concept,resp_no_concept,resp_with_concept\n"
CHAT_BAD_ROLE = '{"messages": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "x"}]}\n'

#: ``(method, recipe, overrides, files, data argument, bad file, message, reader)``: ``files`` are written into a
#: temporary folder (the working directory); ``reader`` is ``(module:function or a function, arguments after the
#: path)``, or None when the method reads the file with the shared reader itself (the chat files).
CASES = [
    (
        "cond-dp",
        "cond-dp.yaml",
        ["data.label=y", "data.y_min=0", "data.y_max=1"],
        {"t.csv": "x1,y\n1,0\n2,abc\n"},
        "path",
        "t.csv",
        "t.csv:3: column 'y': 'abc' is not a number",
        ("zoo.methods.cond_dp.datamodule:read_table", ("y", None)),
    ),
    (
        "crh",
        "crh.yaml",
        [],
        {"p.csv": PAIRS + "1,5,Q,c,A,B\nx,5,Q,c,A,B\n"},
        "path",
        "p.csv",
        "p.csv:3: column 'qid': 'x' is not an integer",
        ("zoo.methods.crh.pairs:read_pairs_csv", ()),
    ),
    (
        "desi",
        "desi.yaml",
        [],
        {"u.csv": "id,x,y_0,y_1\na,1,0.1,0.2\nb,2,0.1,nan\n"},
        "path",
        "u.csv",
        "u.csv:3: column 'y_1': 'nan' is not a finite number",
        ("zoo.methods.desi.datamodule:read_user_file", ("distribution",)),
    ),
    (
        "survshap-iq",
        "survshap-iq.yaml",
        [],
        {"d.csv": "time,event,age\n5,1,60\n-1,0,50\n"},
        "path",
        "d.csv",
        "d.csv:3: column 'time': '-1' is not >= 0",
        ("zoo.methods.survshap_iq.datamodule:read_survival_csv", ()),
    ),
    (
        "survshap-iq",
        "survshap-iq.yaml",
        [],
        {"d.csv": "time,event,age\n5,1,60\n3,2,50\n"},
        "path",
        "d.csv",
        "d.csv:3: column 'event': '2' is not one of 1, 0, 1.0, 0.0, true, false",
        ("zoo.methods.survshap_iq.datamodule:read_survival_csv", ()),
    ),
    (
        "sf-consolidation",
        "sf-consolidation.yaml",
        ["data.drift=csv"],
        {"drift.csv": "step,mass_scale,friction_scale,slip_prob\n0,1,1,0.1\n100,1,1,1.5\n"},
        "drift_path",
        "drift.csv",
        "drift.csv:3: column 'slip_prob': '1.5' is not in [0, 1]",
        ("zoo.methods.sf_consolidation.drift:read_drift_csv", ()),
    ),
    (
        "sf-consolidation",
        "sf-consolidation.yaml",
        ["data.drift=csv"],
        {"drift.csv": "step,mass_scale,friction_scale,slip_prob\n0,1,1,0.1\n100,1,1,0.2\n50,1,1,0.3\n"},
        "drift_path",
        "drift.csv",
        "drift.csv:4: column 'step': 50 does not increase (previous row has 100)",
        ("zoo.methods.sf_consolidation.drift:read_drift_csv", ()),
    ),
    (
        "trsp",
        "trsp.yaml",
        ["data.format=csv", "data.stops_path=stops.csv"],
        {"trips.csv": "a_lon,a_lat,b_lon,b_lat\n-122.4,37.7,-122.4,95\n", "stops.csv": "lon,lat\n-122.4,37.7\n"},
        "path",
        "trips.csv",
        "trips.csv:2: column 'b_lat': '95' is not in [-90, 90]",
        ("zoo.methods.trsp.instances:read_lonlat_csv", ("TRIPS",)),
    ),
    (
        "st-tgexplainer",
        "st-tgexplainer.yaml",
        [],
        {"ev.csv": "src,dst,timestamp\n1,2,5\n1,x,6\n"},
        "path",
        "ev.csv",
        "ev.csv:3: column 'dst': 'x' is not an integer",
        ("zoo.methods.st_tgexplainer.data:read_events", ()),
    ),
    (
        "anchor-adapter",
        "anchor-adapter.yaml",
        [],
        {"p.jsonl": '{"question": "1 + 2", "answer": 3}\n\n{"question": "2 + 2", "answer": "four"}\n'},
        "path",
        "p.jsonl",
        "p.jsonl:3: key 'answer': 'four' is not a number",
        ("zoo.methods.anchor_adapter.datamodule:read_problems", ()),
    ),
    (
        "sembind",
        "sembind.yaml",
        ["data.dataset=folder"],
        {"imgs/captions.csv": "file,caption\na.png,a red thing\nmissing.png,a blue thing\n", "imgs/a.png": "x"},
        "path",
        "imgs",
        "imgs/captions.csv:3: column 'file': 'missing.png' is not a file in",
        ("zoo.methods.sembind.datamodule:read_caption_folder", (8,)),
    ),
    (
        "pulse",
        "pulse.yaml",
        [],
        {"s.csv": "date,n_posts,therapy\n2024-01-01,5,1\n2024-01-02,x,1\n"},
        "series_path",
        "s.csv",
        "s.csv:3: column 'n_posts': 'x' is not an integer",
        ("zoo.methods.pulse.series:read_series_csv", ()),
    ),
    (
        "watchlog",
        "watchlog.yaml",
        [],
        {"l.csv": "line,label\n1,0\n2,yes\n", "ev.jsonl": '{"a": 1}\n{"a": 2}\n'},
        "labels_path",
        "l.csv",
        "l.csv:3: column 'label': 'yes' is not one of 0, 1",
        (lambda labels: _load_event_log(str(Path(labels).parent / "ev.jsonl"), labels), ()),
    ),
    (
        "zoo-lm",
        "zoo-lm-chat.yaml",
        [],
        {"c.jsonl": CHAT_BAD_ROLE},
        "path",
        "c.jsonl",
        "c.jsonl:1: messages[1].role: 'bot' is not one of",
        None,
    ),
    (
        "fast",
        "fast-sae.yaml",
        [],
        {"c.jsonl": CHAT_BAD_ROLE},
        "path",
        "c.jsonl",
        "c.jsonl:1: messages[1].role: 'bot' is not one of",
        None,
    ),
]
IDS = [f"{c[0]}:{c[6].split(': ', 1)[1][:24]}" for c in CASES]


def _write(tmp_path: Path, files: dict) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)


@pytest.mark.parametrize("method,recipe,overrides,files,key,bad,want,reader", CASES, ids=IDS)
def test_train_py_refuses_a_bad_value_before_torch(method, recipe, overrides, files, key, bad, want, reader, tmp_path):
    """The command a user types: exit 2, ``file:line: column ...`` and the recipe key in one line, no torch, no run."""
    _write(tmp_path, files)
    probe = (
        "import sys; from zoo.cli import main; rc = main(['train', *sys.argv[1:]]); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(rc)"
    )
    args = [f"recipe={recipe}", *overrides, f"data.{key}={bad}", f"out_dir={tmp_path / 'runs'}"]
    out = subprocess.run(
        [sys.executable, "-c", probe, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert err[-1].startswith(f"error: {tmp_path / want}"), err
    assert f"data.{key}" in err[-1].partition("(recipe key")[2], err  # and the key to change
    assert "Traceback" not in out.stderr and out.stdout.strip() == "torch not imported", out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("method,recipe,overrides,files,key,bad,want,reader", CASES, ids=IDS)
def test_the_methods_reader_refuses_it_alike(method, recipe, overrides, files, key, bad, want, reader, tmp_path):
    """The datamodule's reader, given the same file, says the same: the early check is the reader's own."""
    if reader is None:
        pytest.skip("read by zoo.data.chat.read_conversations, the function the early check calls")
    _write(tmp_path, files)
    target, extra = reader
    if callable(target):
        fn = target
    else:
        mod_name, name = target.split(":")
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, name)
        extra = tuple(getattr(mod, a) if isinstance(a, str) and a.isupper() else a for a in extra)
    with pytest.raises(DataError) as err:
        fn(str(tmp_path / bad), *extra)
    assert str(err.value).startswith(f"{tmp_path}/{want}"), str(err.value)


def test_the_methods_of_issue_42_have_a_case():
    """The methods whose bad values were found only after the torch import before #42 are all exercised above (a new
    method's typed file is exercised by ``test_data_files_before_torch``, from its table)."""
    late_before = {"cond-dp", "crh", "desi", "survshap-iq", "sf-consolidation", "trsp", "st-tgexplainer"}
    assert late_before | {"anchor-adapter", "sembind", "zoo-lm"} <= {c[0] for c in CASES}
