"""Sync step bodies on the real database. They run in worker threads (asyncio.to_thread) that
keep their own connections between steps; the runner runs them through the app's
`conf.run_sync_step`, which closes the thread's stale or expired connection before and after the
body (CONN_MAX_AGE is 0 in the settings: closed after every step)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from workflows import conf, queue, setup, workflow
from workflows.engine import defaults
from workflows.models import Run


@pytest.fixture
async def step_thread():
    """One worker thread for sync step bodies (the loop's default executor): consecutive steps,
    and whatever the test runs in it, share that thread and its database connection."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sync-step")
    loop = asyncio.get_running_loop()
    loop.set_default_executor(executor)
    yield executor
    await loop.run_in_executor(executor, connections.close_all)  # even when the test failed


async def test_sync_step__its_threads_connection_is_closed_after_the_body(h, step_thread):
    seen = {}

    def count_runs(s):
        count = Run.objects.count()
        wrapper = connections["default"]
        seen.update(thread=threading.get_ident(), wrapper=wrapper, open=wrapper.connection is not None)
        return count

    async def body(ctx):
        return await ctx.step("count", count_runs, max_retries=0)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    assert defaults.sync_step_runner() is conf.run_sync_step  # what WorkflowsConfig.ready configured
    await h.run(reg)
    assert (await handle.ainfo()).result == 1
    assert seen["thread"] != threading.get_ident()  # a worker thread with a connection of its own
    assert seen["wrapper"] is not connections["default"]
    assert seen["open"]  # the query opened it ...
    assert seen["wrapper"].connection is None  # ... and it was closed after the step


async def test_sync_step__a_broken_connection_in_its_thread_is_replaced(h, step_thread):
    threads = []

    def first(s):
        threads.append(threading.get_ident())
        return Run.objects.count()

    def use(s):
        threads.append(threading.get_ident())
        return Run.objects.count()

    async def body(ctx):
        await ctx.step("first", first, max_retries=0)
        await ctx.queue.next("wait", names=["go"])
        return await ctx.step("use", use, max_retries=0)

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "waiting"

    def break_the_threads_connection():
        """What a server dropping an idle connection leaves: Django still holds a dead one."""
        wrapper = connections["default"]
        wrapper.ensure_connection()
        wrapper.connection.close()  # behind Django's back
        return threading.get_ident(), wrapper.connection is not None

    loop = asyncio.get_running_loop()
    thread, still_held = await loop.run_in_executor(step_thread, break_the_threads_connection)
    assert still_held
    await handle.asend("go", None)
    await h.run(reg)
    run = await handle.ainfo()
    assert (run.status, run.error) == ("completed", None)
    assert run.result == 1
    assert threads == [thread, thread]  # the step ran in the thread whose connection was broken
