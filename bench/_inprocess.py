"""Sections measured inside the bench process: the physical floor, the per-step overhead and the
10-step run end to end. The engine runs here with a real Runner over the real DjangoStore, so
every store call takes the same hop to Django's database thread as in `runworkflows`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._common import progress, stats_ms
from ._db import reset_tables


def floor(n: int) -> dict[str, Any]:
    """One committed single-row insert through Django's connection (autocommit), timed each."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_floor")
        if connection.vendor == "postgresql":
            cursor.execute("CREATE TABLE bench_floor (id bigserial PRIMARY KEY, v integer NOT NULL)")
        else:
            cursor.execute(
                "CREATE TABLE bench_floor (id integer PRIMARY KEY AUTOINCREMENT, v integer NOT NULL)"
            )
    samples = []
    with connection.cursor() as cursor:
        for i in range(n + 20):
            t0 = time.perf_counter()
            cursor.execute("INSERT INTO bench_floor (v) VALUES (%s)", [i])
            elapsed = time.perf_counter() - t0
            if i >= 20:  # warm-up
                samples.append(elapsed)
        cursor.execute("DROP TABLE bench_floor")
    out = stats_ms(samples)
    out["per_s"] = len(samples) / sum(samples)
    return out


def _make_store():
    from workflows.storage.django import DjangoStore

    class TimedStore(DjangoStore):
        """The real store as `runworkflows` builds it (a pool of database threads, commits on its
        async connection), noting when a run's completion commit returned to the runner."""

        def __init__(self) -> None:
            super().__init__(db_threads=4)
            self.completed: dict[str, float] = {}

        async def acommit(self, *, run_id, owner, commit, now):
            result = await super().acommit(run_id=run_id, owner=owner, commit=commit, now=now)
            if commit.transition is not None and commit.transition.status == "completed":
                self.completed[run_id] = time.perf_counter()
            return result

    return TimedStore()


def _runner(store):
    from workflows import conf
    from workflows.engine.runner import Runner

    # As `runworkflows` builds it (commit hooks included), minus the watcher: run_due drives it.
    return Runner(
        registry=conf.registry(), store=store, concurrency=20, watch=False, commit_hooks=conf.commit_hooks()
    )


async def _steps(n: int) -> dict[str, Any]:
    from workflows import conf

    from . import flows

    store = _make_store()
    runner = _runner(store)
    client = conf.registry().client("bench_overhead")
    client.store = store
    flows.TIMINGS.clear()
    await client.aget_or_create(["overhead", str(n)])
    await runner.run_due()
    store.close()
    timings = flows.TIMINGS[5:]  # the first steps warm caches up
    direct = [d for d, _s in timings]
    step = [s for _d, s in timings]
    overhead = [s - d for d, s in timings]
    return {"step": stats_ms(step), "direct": stats_ms(direct), "overhead": stats_ms(overhead)}


async def _ten(n: int) -> dict[str, Any]:
    from workflows import conf

    store = _make_store()
    runner = _runner(store)
    client = conf.registry().client("bench_ten")
    client.store = store
    to_commit, to_return = [], []
    for i in range(n + 3):
        t0 = time.perf_counter()
        handle = await client.aget_or_create([f"e2e-{i}"])
        await runner.run_due()
        t_return = time.perf_counter()
        if i >= 3:  # warm-up
            to_commit.append(store.completed[handle.run_id] - t0)
            to_return.append(t_return - t0)
    status = (await handle.ainfo()).status
    store.close()
    if status != "completed":
        raise RuntimeError(f"a 10-step run ended {status}")
    return {"to_completion_commit": stats_ms(to_commit), "to_run_due_return": stats_ms(to_return)}


def _in_loop(coro) -> Any:
    from asgiref.sync import SyncToAsync
    from django.db import connections

    try:
        return asyncio.run(coro)
    finally:  # the database thread's connection
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def measure(db: str, sizes: dict[str, int]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    progress(f"{db}: 1/6 physical floor ({sizes['floor']} single-row inserts)")
    figures["floor"] = floor(sizes["floor"])
    reset_tables()
    progress(f"{db}: 2/6 per-step overhead ({sizes['steps']} steps in one run)")
    figures["step"] = _in_loop(_steps(sizes["steps"]))
    reset_tables()
    progress(f"{db}: 3/6 10-step run end to end ({sizes['ten']} runs)")
    figures["ten"] = _in_loop(_ten(sizes["ten"]))
    reset_tables()
    return figures
