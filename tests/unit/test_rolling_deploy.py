"""A rolling deploy: a runner whose code lacks the version a run was started on leaves the run to a
live runner that registers that version, instead of executing it with its own latest definition
(which could diverge from the history the newer code writes). A version no live runner knows (a
retired one) still runs on the latest definition."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from tests.support import now
from workflows import setup, workflow
from workflows.core.new_run import NewRun
from workflows.core.records import RunnerRecord
from workflows.engine import runner as runner_module
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore

ran: list[str] = []


async def old_body(ctx):
    return await ctx.step("old step", lambda s: ran.append("v1") or "v1")


old_code = setup(use={"wf": workflow(old_body, version="1")})


def newer_runner(store: DjangoStore, *, alive: bool) -> None:
    seen = now() - dt.timedelta(seconds=1 if alive else 3600)
    store.register_runner(
        RunnerRecord(
            owner="new-host:1:abcd", host="new-host", pid=1, started_at=seen, last_seen=seen,
            lease_seconds=30.0, concurrency=10, workflows={"wf": ["2", "1"]},
        )
    )  # fmt: skip


def run_of_version(store: DjangoStore, version: str) -> str:
    run, _ = store.get_or_create_run(
        NewRun(workflow="wf", key=["k"], version=version, initial_state={}, now=now())
    )
    return run.id


async def drain(store: DjangoStore) -> Runner:
    runner = Runner(registry=old_code, store=store, watch=False, lease_seconds=30)
    await asyncio.wait_for(runner.run(until_idle=True), 30)
    return runner


async def test_a_run_of_a_newer_version_is_left_to_a_runner_that_knows_it(django_store, caplog, monkeypatch):
    monkeypatch.setattr(runner_module, "DEFER_SECONDS", 600.0)  # --until-idle must not wait for it
    ran.clear()
    store = django_store
    newer_runner(store, alive=True)
    run_id = run_of_version(store, "2")
    with caplog.at_level(logging.WARNING):
        await drain(store)
    run = store.get_run(run_id)
    assert ran == [] and store.load_history(run_id) == []  # the old code never touched it
    assert run.status == "pending" and run.lease_owner == ""
    assert run.wake_at > now() + dt.timedelta(seconds=500)  # due again later, for the knower
    assert "version '2' are left to runners that know that version (new-host:1:abcd)" in caplog.text


async def test_a_version_no_live_runner_knows_runs_on_the_latest_definition(django_store):
    ran.clear()
    store = django_store
    newer_runner(store, alive=False)  # the runner that knew it is dead: nobody else will take it
    run_id = run_of_version(store, "0-retired")
    await drain(store)
    assert ran == ["v1"] and store.get_run(run_id).status == "completed"
