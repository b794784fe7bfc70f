"""Starts runs of one workflow at a steady pace until it is stopped (SIGTERM): the load behind
`bench/side_by_side.py`'s paced submits, in a process of its own so that its starts never hold
the GIL of the process that times the submits.

    python bench/_pacer.py --workflow bench_ten --per-second 25 --prefix pace-

Prints "started" once Django is set up, and at exit how many runs it started.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workflow", required=True)
    parser.add_argument("--per-second", type=float, required=True)
    parser.add_argument("--prefix", required=True)
    args = parser.parse_args()
    setup_django()
    from workflows import conf

    client = conf.registry().client(args.workflow)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    interval = 1 / args.per_second
    print("started", flush=True)
    started = 0
    next_at = time.monotonic()
    while not stopping:
        client.get_or_create([f"{args.prefix}{started}"])
        started += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:  # behind: carry on from now rather than catch up in a burst
            next_at = time.monotonic()
    print(started, flush=True)


if __name__ == "__main__":
    main()
