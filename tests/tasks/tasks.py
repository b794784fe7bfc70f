"""Tasks for the tests of `workflows.tasks`, defined as an app would: module-level `@task`s on the
project's TASKS (config/settings.py: "default" is a DurableBackend). CALLS records every call in
this process; the crash test's task logs to a file instead (ACCEPTANCE_DIR), since it runs in
runner processes."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

from workflows import queue, setup, workflow
from workflows.tasks import task

CALLS: Counter = Counter()  # "<task> <first arg>" -> calls in this process
CONTEXTS: list[tuple[str, int]] = []  # (result id, attempt) seen by context tasks


class Flaky(Exception):
    pass


@task()
def add(a, b):
    CALLS[f"add {a}"] += 1
    return a + b


@task
async def async_add(a, b):
    await asyncio.sleep(0)
    CALLS[f"async_add {a}"] += 1
    return a + b


@task(takes_context=True, max_attempts=3, backoff=0.01)
def flaky(context, key):
    """Fails on its first two attempts, succeeds on the third."""
    CONTEXTS.append((context.task_result.id, context.attempt))
    CALLS[f"flaky {key}"] += 1
    if context.attempt < 3:
        raise Flaky(f"attempt {context.attempt} of {key} failed")
    return {"key": key, "attempt": context.attempt}


@task(max_attempts=2, backoff=(0.01, 0.02))
def always_fails(key):
    CALLS[f"always_fails {key}"] += 1
    raise ValueError(f"{key} is broken")


@task(max_attempts=4, backoff=lambda exc, result: None if isinstance(exc, KeyError) else 0.01)
def gives_up_on_key_error(key):
    """The proposal's callable backoff: None stops the retries."""
    CALLS[f"gives_up {key}"] += 1
    raise KeyError(key)


@task(timeout=0.05, max_attempts=1)
async def too_slow(key):
    await asyncio.sleep(5)


@task
def divide(a, b):
    return a / b


@task(takes_context=True)
def my_status(context):
    """The task's own result as another process reads it while it runs."""
    return context.task_result.task.get_result(context.task_result.id).status


def _hidden(x):
    return x


renamed = task(_hidden)  # the runner would look for `_hidden`, which is no Task


# --- the crash test's task: runs in runner processes, logs to a file --------------------------------


def _dir() -> Path:
    return Path(os.environ["ACCEPTANCE_DIR"])


def log(line: str) -> None:
    with open(_dir() / "ledger.log", "a") as f:  # O_APPEND: whole lines, even from two processes
        f.write(line + "\n")


@task
async def blocking(key):
    """Logs its start, waits for the file 'release', logs its end."""
    log(f"{key} start")
    while not (_dir() / "release").exists():  # noqa: ASYNC110 - the signal comes from another process
        await asyncio.sleep(0.02)
    log(f"{key} end")
    return f"{key} done"


# --- a workflow for the outbox test: get_or_create + send in the caller's transaction ---------------


async def inbox_body(ctx):
    return (await ctx.queue.next("wait", names=["start"])).body


inbox = setup(use={"tasks_test_inbox": workflow(inbox_body, queues={"start": queue()})})
