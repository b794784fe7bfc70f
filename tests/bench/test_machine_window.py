"""`bench/_machine.py` reads what the machine did over a window: a test can see it move."""

from __future__ import annotations

import os
import sys
import time

import pytest

from bench import _machine

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


def test_window__a_core_kept_busy_shows_in_the_cpu_figure():
    before = _machine.snapshot(None)
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # one core busy: at least 1/cores of the machine
        pass
    window = _machine.window(before, _machine.snapshot(None))
    assert 100 / (os.cpu_count() or 1) * 0.6 <= window["cpu_busy_pct"] <= 100
    assert window["disk"] is None  # no device asked for


def test_window__a_synced_write_shows_in_the_disk_figures(tmp_path):
    device = _machine.data_device(str(tmp_path))
    before = _machine.snapshot(device)
    if before.disk is None:
        pytest.skip(f"{tmp_path} is on no block device of /proc/diskstats (a tmpfs, an overlay)")
    # The kernel counts busy time in whole ticks (up to 10 ms each): over a window of a few ms one
    # tick reads as more than 100% busy, so the window lasts half a second.
    deadline = time.monotonic() + 0.5
    with open(tmp_path / "data", "wb") as f:
        while time.monotonic() < deadline:
            f.write(os.urandom(64 * 1024))
            f.flush()
            os.fsync(f.fileno())
            time.sleep(0.02)
    disk = _machine.window(before, _machine.snapshot(device))["disk"]
    assert disk["writes_per_s"] > 0
    assert 0 <= disk["busy_pct"] <= 100 * 1.05  # ms of I/O per second, rounded by the kernel


def test_data_device__a_directory_not_on_this_machine_has_none():
    assert _machine.data_device("/no/such/data/directory") is None
    assert _machine.data_device(None) is None
