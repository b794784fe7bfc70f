"""This machine's speed at the kind of Python the CPU figures measure: the CPU time of one fixed
workload, printed beside them.

Why: the CPU-bound figures (a runner's ms per example job, a step's CPU, the web process's CPU
per request) are absolute times, and the machines these benches run on differ by a factor of two
to three for the same code (the example job's own code, which no change touched, read 0.3 ms on
2026-12-06 and 1.0 ms on 2026-12-07). One machine moves by as much within minutes: this reference
read 20.5 ms and 41 ms a minute apart on 2026-12-07, with nothing else running. Printed beside a
figure, it shows how fast the interpreter ran when the figure was taken (not the kernel's or the
disk's share): two figures whose references are far apart say as much about the moments as about
the code. The best of several rounds is taken, the reading least disturbed by other work on the
machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

ROUNDS = 5
ITERATIONS = 2000


@dataclass
class _Record:
    name: str
    position: int
    output: object


def _workload() -> int:
    """The engine's mix in small: JSON round trips of a small record, dict and list work, a
    dataclass made, a few calls (about 20 ms of CPU on the machines of December 2026)."""
    value = {"company": "Acme Corp", "items": [1, 2, 3], "meta": {"model": "demo", "tokens": 812, "ok": True}}
    kept = 0
    for i in range(ITERATIONS):
        text = json.dumps(value, separators=(",", ":"))
        copy = json.loads(text)
        copy["items"].append(i)
        record = _Record(name=f"enrich-{i}", position=i, output=copy)
        keys = sorted(k for k, v in record.output.items() if isinstance(v, dict | list))
        kept += len(keys) + len(text)
    return kept


def reference_ms(rounds: int = ROUNDS) -> float:
    """CPU milliseconds of the fixed workload on this thread, the best of `rounds`."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        _workload()
        best = min(best, time.thread_time() - t0)
    return best * 1000


def described(rounds: int = ROUNDS) -> str:
    """The reference as the benches print it."""
    return f"{reference_ms_text(rounds)} of CPU (bench/_speed.py, best of {rounds})"


def reference_ms_text(rounds: int = ROUNDS) -> str:
    """The reference alone ("reference workload 20.3 ms"), for a bench that prints it twice
    (at its start and at its end: the speed moves by as much within minutes)."""
    return f"reference workload {reference_ms(rounds):.1f} ms"
