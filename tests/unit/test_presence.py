"""Runners' presence and same-host takeover over the real store: a runner announces itself,
refreshes and withdraws its record; it takes over the runs of a dead runner of its own host at
once, never those of a live process or of another host; it reports due runs no live runner knows."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from tests.support import now
from workflows import setup, workflow
from workflows.core.new_run import NewRun
from workflows.core.records import RunnerRecord
from workflows.engine import presence
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore


async def _one_step(ctx):
    return await ctx.step("only", lambda s: "done")


registry = setup(use={"wf": workflow(_one_step)})
LONG_LEASE = 300.0


def exited_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def ghost(store: DjangoStore, **fields) -> tuple[str, RunnerRecord]:
    """A run held under a long lease by runner `ghost`, whose presence record is `fields`."""
    run, _ = store.get_or_create_run(
        NewRun(workflow="wf", key=["k"], version="", initial_state={}, now=now())
    )
    store.claim(owner="ghost", workflows=["wf"], limit=1, lease_seconds=LONG_LEASE, now=now())
    record = RunnerRecord(
        owner="ghost",
        host=presence.hostname(),
        pid=exited_pid(),
        machine=presence.machine(),
        process_start="",
        started_at=now() - dt.timedelta(minutes=5),
        last_seen=now() - dt.timedelta(seconds=3),
        lease_seconds=LONG_LEASE,
        concurrency=1,
        workflows={"wf": [""]},
    )
    record = replace(record, **fields)
    store.register_runner(record)
    return run.id, record


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    """Wait for `predicate()` with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def runners(store: DjangoStore) -> dict[str, RunnerRecord]:
    """The presence records, by owner."""
    return {r.owner: r for r in store.list_runners()}


async def run_until_idle(store: DjangoStore, **kwargs) -> Runner:
    runner = Runner(registry=registry, store=store, lease_seconds=LONG_LEASE, watch=False, **kwargs)
    await asyncio.wait_for(runner.run(until_idle=True), 30)
    return runner


async def test_a_runner_announces_itself_refreshes_and_withdraws(django_store):
    store = django_store
    runner = Runner(registry=registry, store=store, heartbeat_seconds=0.02, watch=False, concurrency=3)
    task = asyncio.create_task(runner.run())
    await until(lambda: runners(store), "the runner to announce itself")
    [me] = store.list_runners()
    assert (me.owner, me.host, me.pid, me.concurrency) == (runner.owner, presence.hostname(), os.getpid(), 3)
    assert me.workflows == {"wf": [registry.get("wf").version]} and me.alive(now())
    first_seen = me.last_seen
    await until(lambda: runners(store)[runner.owner].last_seen > first_seen, "a heartbeat to refresh it")
    store.unregister_runner(runner.owner)  # forgotten meanwhile: it registers again
    await until(lambda: runner.owner in runners(store), "the runner to register again")
    runner.request_stop()
    await asyncio.wait_for(task, 10)
    assert store.list_runners() == []  # a graceful stop removes it


async def test_restart__takes_over_a_dead_runner_of_this_host_at_once(django_store):
    store = django_store
    run_id, _ = ghost(store)
    await run_until_idle(store)
    run = store.get_run(run_id)
    assert run.status == "completed"  # without a takeover it would wait LONG_LEASE seconds
    assert "ghost" not in runners(store)  # the dead runner's record went with its runs
    assert store.list_runners() == []


async def test_a_reused_pid__its_old_runner_is_taken_over(django_store):
    store = django_store
    # Our own pid, but with a start time that is not ours: the runner that had it has exited.
    run_id, _ = ghost(store, pid=os.getpid(), process_start="1")
    await run_until_idle(store)
    assert store.get_run(run_id).status == "completed"


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"host": "another-host"}, id="another host"),
        pytest.param({"machine": "another-boot/pid:[1]"}, id="another kernel or PID namespace"),
        pytest.param({"pid": os.getpid(), "process_start": presence.process_start(os.getpid())}, id="alive"),
        pytest.param({"pid": os.getpid(), "process_start": ""}, id="alive, start unknown"),
    ],
)
async def test_never_takes_over_a_live_process_or_another_host(django_store, fields):
    store = django_store
    run_id, _ = ghost(store, **fields)
    await run_until_idle(store)
    run = store.get_run(run_id)
    assert (run.status, run.lease_owner) == ("running", "ghost")  # still held: the lease runs on
    assert "ghost" in runners(store)


def test_process_gone__exited_zombie_and_live_processes():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = presence.process_start(proc.pid)
        assert start and not presence.process_gone(proc.pid, start)
        assert presence.process_gone(proc.pid, str(int(start) + 1))  # the pid, another process
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not presence.process_gone(proc.pid, start):  # a zombie until reaped: gone already
            assert time.monotonic() < deadline, "the killed child never counted as gone"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()
    assert presence.process_gone(proc.pid, start)


async def test_due_runs_no_live_runner_knows__reported_once_per_workflow(django_store, caplog):
    store = django_store
    store.get_or_create_run(NewRun(workflow="orphan", key=["a"], version="", initial_state={}, now=now()))
    store.get_or_create_run(NewRun(workflow="orphan", key=["b"], version="", initial_state={}, now=now()))
    runner = Runner(registry=registry, store=store, watch=False)
    with caplog.at_level(logging.WARNING, logger="workflows.engine.runner"):
        await runner.roster.announce()
        await runner.roster.look_around()
    lines = [r.getMessage() for r in caplog.records if "no live runner knows" in r.getMessage()]
    assert lines == [
        "2 run(s) of workflow 'orphan' are due and no live runner knows that workflow (this runner"
        " serves wf): they wait until a runner that registers it starts"
    ]
    caplog.clear()
    other = replace(runners(store)[runner.owner], owner="other", workflows={"orphan": ["1"]})
    store.register_runner(other)  # a live runner knows it: nothing to report
    await runner.roster.look_around()
    store.register_runner(replace(other, last_seen=now() - dt.timedelta(hours=1)))  # it died
    with caplog.at_level(logging.WARNING, logger="workflows.engine.runner"):
        await runner.roster.look_around()
    assert sum("'orphan'" in r.getMessage() for r in caplog.records) == 1  # reported again


def test_runner_record_alive_for_a_few_lease_periods():
    record = RunnerRecord(owner="o", host="h", pid=1, started_at=now(), last_seen=now(), lease_seconds=10)
    assert record.alive(record.last_seen + dt.timedelta(seconds=30))
    assert not record.alive(record.last_seen + dt.timedelta(seconds=31))


class NoPresenceStore(DjangoStore):
    """A store whose presence table is missing (a deploy before its migration)."""

    def register_runner(self, runner):
        raise RuntimeError("no such table: workflows_runnerpresence")

    def list_runners(self):
        raise RuntimeError("no such table: workflows_runnerpresence")


async def test_presence_failing__the_runner_still_runs_its_runs(engine_db, caplog):
    store = NoPresenceStore()
    run, _ = store.get_or_create_run(
        NewRun(workflow="wf", key=["k"], version="", initial_state={}, now=now())
    )
    with caplog.at_level(logging.WARNING, logger="workflows.engine.runner"):
        await run_until_idle(store)
    assert store.get_run(run.id).status == "completed"
    assert any("presence not recorded (trying again later)" in r.getMessage() for r in caplog.records)
