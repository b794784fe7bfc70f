"""`bench/_speed.py`: the reference workload the CPU-bound benches print beside their figures."""

from __future__ import annotations

import re

from bench import _speed


def test_reference__is_the_best_round_of_the_thread_cpu(monkeypatch):
    readings = iter([0.0, 0.030, 1.0, 1.020, 2.0, 2.025])  # rounds of 30, 20 and 25 ms
    monkeypatch.setattr(_speed.time, "thread_time", lambda: next(readings))
    monkeypatch.setattr(_speed, "_workload", lambda: 0)
    assert abs(_speed.reference_ms(rounds=3) - 20.0) < 1e-6


def test_reference__a_real_round_costs_cpu_and_reads_as_printed():
    text = _speed.described(rounds=1)
    found = re.fullmatch(r"reference workload (\d+\.\d) ms of CPU \(bench/_speed\.py, best of 1\)", text)
    assert found is not None, text
    assert float(found.group(1)) > 0
