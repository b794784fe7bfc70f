"""Shared bits of the benchmark: paths, database URLs, statistics, progress lines, Django setup."""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where the SQLite database, runner logs and counts go (a test points it at a temporary folder).
BENCH_VAR = Path(os.environ.get("BENCH_VAR") or ROOT / "var" / "bench")
SQLITE_PATH = BENCH_VAR / "bench.sqlite3"
PG_DATABASE = os.environ.get("BENCH_PG_DATABASE", "bench_workflows")
PG_SERVER_URL = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
REGISTRY_PATH = "bench.flows.registry"

# Progress lines count from the parent's start, also in the measuring child processes.
os.environ.setdefault("BENCH_T0", str(time.time()))
_START = float(os.environ["BENCH_T0"])


def database_url(db: str) -> str:
    if db == "sqlite":
        return f"sqlite:///{SQLITE_PATH}"
    return f"{PG_SERVER_URL}/{PG_DATABASE}"


def progress(message: str) -> None:
    print(f"[bench {time.time() - _START:6.1f}s] {message}", file=sys.stderr, flush=True)


def stats_ms(seconds: list[float]) -> dict[str, float]:
    """Median and p99 (nearest rank) of durations given in seconds, in milliseconds."""
    if not seconds:
        return {"n": 0, "median_ms": float("nan"), "p99_ms": float("nan"), "mean_ms": float("nan")}
    ordered = sorted(seconds)
    p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]
    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p99_ms": p99 * 1000,
        "mean_ms": statistics.fmean(ordered) * 1000,
    }


def bench_env(db: str) -> dict[str, str]:
    """The environment of every bench process: the bench database and the bench registry. The
    channel layer stays in-memory (REDIS_URL unset): the figures are the engine's, not Redis's."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": database_url(db),
            "WORKFLOWS_REGISTRIES": REGISTRY_PATH,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def niced(nice: int) -> list[str]:
    """The prefix that starts a command at CPU priority `nice` (none for 0). `nice` execs the
    command: the process keeps its pid (its CPU time and memory are read through it)."""
    return ["nice", "-n", str(nice)] if nice else []


def setup_django() -> None:
    """Configure Django in this process (DATABASE_URL must already name the bench database)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def wait_until(predicate, *, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
