"""Django tasks, durably: the built-in workflow `django.task` every enqueued task runs as (see
`workflows.tasks`).

    state = what was enqueued: {"task", "backend", "queue_name", "run_after", "enqueued_at",
             "args", "kwargs", "retry": {"max_attempts", "backoff", "backoff_max", "timeout"}}
    [sleep "run-after" until run_after]          (a deferred task: a durable timer)
    step "<task path>": import the task, send task_started, call it (a coroutine is awaited), send
                        task_finished on success; retried by the task's max_attempts and backoff
    on a failure for good: task_finished (FAILED), and the run fails

The step records the return value once: a runner killed mid-task reruns the attempt, never a
completed one. Signals are sent by whichever runner does the work, at least once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import inspect
import logging
from dataclasses import replace
from typing import Any

from ..core.exceptions import BadInput, CriticalError, RetryAfter, StepFailed
from ..engine import defaults
from ..engine.definition import workflow
from ..engine.registry import setup
from ..engine.step_context import StepContext
from ..tasks_workflow import TaskTimeout
from .framework import (
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    get_exception_traceback,
    normalize_json,
    task_finished,
    task_started,
)
from .results import (
    WORKFLOW,
    Attempts,
    attempt_note,
    class_path,
    load_task,
    result_of_run_id,
    worker_id,
)

logger = logging.getLogger(__name__)

STEP_INPUT = ("task", "backend", "queue_name", "enqueued_at", "args", "kwargs")
NAME_MAX = 200  # an entry's name column


def step_name(spec: dict[str, Any]) -> str:
    return str(spec["task"])[-NAME_MAX:]


async def run_task(ctx: Any) -> Any:
    """The body of `django.task`: the deferral, then the one step."""
    spec = ctx.state
    if spec.get("run_after"):
        await ctx.sleep_until("run-after", dt.datetime.fromisoformat(spec["run_after"]))
    retry = spec["retry"]
    try:
        return await ctx.step(
            step_name(spec),
            functools.partial(call_task, retry=retry),
            input={k: spec[k] for k in STEP_INPUT},
            timeout=0,  # the step body enforces the task's timeout (TaskTimeout): see call_task
            max_retries=retry["max_attempts"] - 1,
            retry_backoff_base=retry["backoff"],
            retry_backoff_max=retry["backoff_max"],
        )
    except StepFailed:
        try:
            await _finished_for_good(ctx.run_id)
        except Exception:  # a receiver's error must not replace the task's
            logger.exception("task_finished for the failed task of run %s raised; ignored", ctx.run_id)
        raise


async def _finished_for_good(run_id: str) -> None:
    """task_finished for a task that failed for good (its last attempt, a critical error, a
    timeout...): its result read back from the attempts as recorded."""
    result = await defaults.default_store().run_sync(result_of_run_id, run_id)
    failed = replace(result, status=TaskResultStatus.FAILED, finished_at=dt.datetime.now(dt.UTC))
    await task_finished.asend(type(failed.task.get_backend()), task_result=failed)


async def call_task(step: StepContext, *, retry: dict[str, Any]) -> Any:
    """One attempt: import the task, tell task_started, call it, tell task_finished; record it.

    A failure leaves a note at the end of the recorded traceback (the exception's class path and
    this worker: the engine records only its class name). A callable `backoff` decides each retry:
    seconds (RetryAfter) or None (CriticalError: no more attempts), both chained from the error.
    """
    spec = step.input
    worker = worker_id()
    step.meta["worker_id"] = worker
    result: TaskResult | None = None
    try:
        task = load_task(spec["task"], backend=spec["backend"], queue_name=spec["queue_name"])
        prior = Attempts()
        if step.attempt > 1:
            prior = await defaults.default_store().run_sync(Attempts.of_run, step.run_id)
        now = dt.datetime.now(dt.UTC)
        result = TaskResult(
            task=task,
            id=step.key[0],
            status=TaskResultStatus.RUNNING,
            enqueued_at=dt.datetime.fromisoformat(spec["enqueued_at"]),
            started_at=prior.started_at or now,
            finished_at=None,
            last_attempted_at=now,
            args=spec["args"],
            kwargs=spec["kwargs"],
            backend=spec["backend"],
            errors=list(prior.errors),
            worker_ids=[*prior.worker_ids, worker],
        )
        sender = type(task.get_backend())
        await task_started.asend(sender, task_result=result)
        args = [TaskContext(task_result=result), *spec["args"]] if task.takes_context else list(spec["args"])
        value = normalize_json(await _call(task.func, args, spec["kwargs"], retry.get("timeout"), step))
    except Exception as exc:
        raise _failure(exc, worker, result, step, retry)  # noqa: B904 - the original, or chained from it
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", dt.datetime.now(dt.UTC))
    object.__setattr__(result, "_return_value", value)
    try:
        await task_finished.asend(sender, task_result=result)
    except Exception:  # the task succeeded: a receiver's error must not run it again
        logger.exception("task_finished for task %s raised; ignored", result.id)
    return value


async def _call(
    func: Any, args: list[Any], kwargs: dict[str, Any], timeout: float | None, step: StepContext
) -> Any:
    """The task function: a coroutine awaited here (cancelled at the timeout), a plain function in
    a worker thread as the engine runs sync steps (left to finish in its thread at the timeout)."""
    if inspect.iscoroutinefunction(func):
        call = func(*args, **kwargs)
    else:
        call = asyncio.to_thread(defaults.sync_step_runner(), lambda _step: func(*args, **kwargs), step)
    if not timeout:
        return await call
    try:
        async with asyncio.timeout(timeout) as scope:
            return await call
    except TimeoutError:
        if scope.expired():
            raise TaskTimeout(f"task {step.name!r} timed out after {timeout:g}s") from None
        raise


def _failure(
    exc: Exception, worker: str, result: TaskResult | None, step: StepContext, retry: dict[str, Any]
) -> Exception:
    """The exception the engine records for a failed attempt, with its note."""
    raised: Exception = exc
    backoff = _backoff_callable(result.task) if result is not None else None
    last = step.attempt >= retry["max_attempts"]
    if (
        callable(backoff)
        and result is not None
        and not last
        and not isinstance(exc, CriticalError | BadInput)
    ):
        error = TaskError(exception_class_path=class_path(type(exc)), traceback=get_exception_traceback(exc))
        failed = replace(result, status=TaskResultStatus.FAILED, errors=[*result.errors, error])
        try:
            delay = backoff(exc, failed)
        except Exception as backoff_error:  # a broken backoff: the engine's own backoff applies
            exc.add_note(f"backoff() raised {backoff_error!r}; the default backoff applies")
        else:
            raised = (
                CriticalError(f"backoff() returned None: no more attempts after {type(exc).__name__}: {exc}")
                if delay is None
                else RetryAfter(float(delay), f"{type(exc).__name__}: {exc} (retry in {float(delay):g}s)")
            )
            raised.__cause__ = exc
    raised.add_note(attempt_note(exc, worker))
    return raised


def _backoff_callable(task: Any) -> Any:
    """The task's backoff, else its backend's OPTIONS one, when it is a callable."""
    backoff = getattr(task, "backoff", None)
    if backoff is None:
        backoff = getattr(task.get_backend(), "defaults", {}).get("backoff")
    return backoff if callable(backoff) else None


task_workflow = workflow(run_task, labels=("task", "queue_name"))
registry = setup(use={WORKFLOW: task_workflow})
