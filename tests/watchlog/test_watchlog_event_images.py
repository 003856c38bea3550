"""The event renderer: deterministic, every key stays inside its own slot, layout errors are caught."""

import numpy as np
import pytest

from zoo.methods.watchlog.event_images import SYSMON_LAYOUT, EventRenderer, normalise_value, value_bins

EVENT = {
    "event_id": 10,
    "image": "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
    "target_image": "C:\\windows\\system32\\lsass.exe",
    "granted_access": "0x1010",
    "call_trace": "C:\\windows\\SYSTEM32\\ntdll.dll+9c534|UNKNOWN(00000000)",
    "user": "THESHIRE\\pgustavo",
    "host": "WORKSTATION5",
    "label": 1,
    "custom_key": "abc",
}


def test_render_is_deterministic_and_bounded():
    a = EventRenderer().render(EVENT)
    value_bins.cache_clear()
    b = EventRenderer().render(dict(reversed(list(EVENT.items()))))  # key order and cache do not matter
    assert a.dtype == np.float32 and a.shape == (32, 128)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1 and a.sum() > 0


def test_each_key_stays_in_its_slot():
    r = EventRenderer()
    for i, entry in enumerate(r.layout):
        key = entry.split("|")[0]
        ev = {key: "C:\\some\\value-123.exe"} if key != "*" else {"zzz": 1}
        img = r.render(ev)
        top, left, bottom, right = r.slot_box(i)
        inside = np.zeros_like(img, dtype=bool)
        inside[top:bottom, left:right] = True
        assert img[inside].sum() > 0, entry
        assert img[~inside].sum() == 0, f"{entry} drew outside slot {i}"


def test_unknown_keys_go_to_the_star_slot_and_reserved_keys_are_never_drawn():
    r = EventRenderer()
    star = next(i for i, e in enumerate(r.layout) if "*" in e.split("|"))
    assert r.slot_texts({"custom_key": "abc"})[star] == "custom_key=abc"
    assert all(t is None for t in r.slot_texts({"label": 1, "host": "x", "actor_guid": "{g}"}))
    assert r.render({"label": 1, "dataset": "d"}).sum() == 0


def test_equal_values_equal_pixels_and_digit_runs_normalised():
    assert normalise_value("C:\\Temp\\A123\\b45.EXE") == "c:\\temp\\a0\\b0.exe"
    r = EventRenderer()
    np.testing.assert_array_equal(r.render({"image": "x\\run1.exe"}), r.render({"image": "X\\RUN22.exe"}))


def test_shared_basename_shares_pixels():
    r = EventRenderer()
    a = r.render({"image": "c:\\a\\powershell.exe"}) > 0
    b = r.render({"image": "d:\\zz\\powershell.exe"}) > 0
    c = r.render({"image": "c:\\a\\notepad.exe"}) > 0
    assert (a & b).sum() > (a & c).sum() - 3  # the basename features (counted twice) dominate the overlap


def test_layout_errors():
    with pytest.raises(ValueError, match="16 slots"):
        EventRenderer(layout=SYSMON_LAYOUT[:-1])
    with pytest.raises(ValueError, match="slot 0 and slot 1"):
        EventRenderer(layout=("a", "a") + SYSMON_LAYOUT[2:])
    with pytest.raises(ValueError, match="not divisible"):
        EventRenderer(height=30)
