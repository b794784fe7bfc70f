"""Django tasks, durably: a task's result read from its run (see `workflows.tasks`).

A task is a run of the built-in workflow `django.task` whose key is the result id. Its state is
what was enqueued (the task's path, args and kwargs, queue, run_after and retry options); its one
step calls the task function, each attempt an Attempt row. This module turns those records into
the framework's `TaskResult`: the status from the run's, one `TaskError` per failed attempt, the
worker of each attempt, the timestamps and the return value.

Each failed attempt's traceback ends with a note the step body adds (`NOTE_PREFIX` + JSON holding
the exception's class path and the worker), since the engine records an exception's class name,
not its module; the worker of the successful attempt is in the step's meta.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os
import socket
from dataclasses import replace
from typing import Any

from django.core.exceptions import SuspiciousOperation
from django.utils.module_loading import import_string

from ..core.jsonvalue import unstorable
from ..core.keys import key_identity
from .framework import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus

WORKFLOW = "django.task"  # the built-in workflow every task runs as
NOTE_PREFIX = "django.task attempt: "  # the note a failed attempt's traceback ends with
UNKNOWN_WORKER = "unknown"  # an attempt whose worker was not recorded (it timed out in the engine)

STATUSES = {
    "pending": TaskResultStatus.READY,
    "waiting": TaskResultStatus.READY,  # run_after not reached, or a retry's backoff
    "running": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


def worker_id() -> str:
    """This process, as `worker_ids` names it: host and pid (read each time: a fork changes it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def attempt_note(exc: BaseException, worker: str) -> str:
    return NOTE_PREFIX + json.dumps({"exception_class_path": class_path(type(exc)), "worker_id": worker})


def load_task(path: str, *, backend: str, queue_name: str, run_after: str | None = None) -> Task:
    """The Task a run names, as it was enqueued (queue, backend, run_after). ImportError when its
    module or name is gone; SuspiciousOperation when the name is not a Task (as the database
    backend of django-tasks does)."""
    task = import_string(path)
    if not isinstance(task, Task):
        raise SuspiciousOperation(f"{path!r} does not point to a Task")
    return replace(
        task,
        backend=backend,
        queue_name=queue_name,
        run_after=dt.datetime.fromisoformat(run_after) if run_after else None,
    )


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def error_of(error: dict[str, Any] | None, outcome: str = "error") -> tuple[TaskError, str]:
    """A recorded error (the engine's `name`, `message`, `traceback`) as a TaskError, with the
    worker that raised it (from the step body's note, when there is one)."""
    error = error or {}
    traceback = str(error.get("traceback") or "")
    for line in reversed(traceback.splitlines()):
        if line.startswith(NOTE_PREFIX):
            try:
                noted = json.loads(line[len(NOTE_PREFIX) :])
                return TaskError(
                    exception_class_path=str(noted["exception_class_path"]), traceback=traceback
                ), str(noted.get("worker_id") or UNKNOWN_WORKER)
            except (ValueError, KeyError, TypeError):
                break
    name = str(error.get("name") or "Exception")
    if outcome == "timeout":
        path = "workflows.engine.steps.StepTimeout"
    elif "." not in name and isinstance(getattr(builtins, name, None), type):
        path = f"builtins.{name}"
    else:
        path = name
    return TaskError(exception_class_path=path, traceback=traceback), UNKNOWN_WORKER


class Attempts:
    """What the step's attempts so far recorded: errors, workers and when the first one started."""

    def __init__(self) -> None:
        self.errors: list[TaskError] = []
        self.worker_ids: list[str] = []
        self.started_at: dt.datetime | None = None
        self.last_started_at: dt.datetime | None = None
        self.current_input: dict[str, Any] | None = None

    @classmethod
    def of_run(cls, run_id: Any) -> Attempts:
        """Two queries: the run's step entries (current and superseded by an operator's replay)
        and their attempts, oldest first."""
        from ..models import Entry, attempts_in_order

        found = cls()
        entries = {
            e.id: e
            for e in Entry.objects.filter(run_id=run_id, kind="step")
            .only("kind", "status", "input", "meta", "attempts", "started_at", "finished_at", "superseded")
            .prefetch_related(attempts_in_order())
        }
        for e in sorted(entries.values(), key=lambda e: e.id):
            if not e.superseded:
                found.current_input = e.input
            started = _aware(e.started_at)
            if started is not None and (found.started_at is None or started < found.started_at):
                found.started_at = started
        # Each entry's attempts, with the one a first-try success implies (`Entry.attempt_history`)
        attempts = [a for _id, e in sorted(entries.items()) for a in e.attempt_history()]
        for a in attempts:
            if a.outcome == "ok":
                meta = entries[a.entry_id].meta or {}
                found.worker_ids.append(str(meta.get("worker_id") or UNKNOWN_WORKER))
            else:
                error, worker = error_of(a.error, a.outcome)
                found.errors.append(error)
                found.worker_ids.append(worker)
            started = _aware(a.started_at)
            if found.started_at is None or (started is not None and started < found.started_at):
                found.started_at = started
            found.last_started_at = started
        return found


def find_run(result_id: str) -> Any:
    """The run of a result id; TaskResultDoesNotExist when there is none."""
    from ..models import Run

    if not isinstance(result_id, str) or not result_id or unstorable(result_id) is not None:
        raise TaskResultDoesNotExist(result_id)
    run = Run.objects.filter(workflow=WORKFLOW, key_hash=key_identity([result_id])[1]).first()
    if run is None:
        raise TaskResultDoesNotExist(result_id)
    return run


def result_of_run(run: Any) -> TaskResult:
    """The TaskResult of a `django.task` run (a `workflows.models.Run`)."""
    spec = run.state
    attempts = Attempts.of_run(run.id)
    status = STATUSES[run.status]
    errors = list(attempts.errors)
    if status == TaskResultStatus.FAILED and not errors and run.error:
        errors.append(error_of(run.error)[0])  # the run failed outside the step
    started_at = attempts.started_at
    last_attempted_at = attempts.last_started_at or started_at
    if status == TaskResultStatus.RUNNING:
        # An attempt is under way: the run was last claimed when it began.
        started_at = started_at or _aware(run.updated_at)
        last_attempted_at = _aware(run.updated_at)
    source = attempts.current_input or spec
    result: TaskResult = TaskResult(
        task=load_task(
            spec["task"],
            backend=spec["backend"],
            queue_name=spec["queue_name"],
            run_after=spec.get("run_after"),
        ),
        id=run.key[0],
        status=status,
        enqueued_at=_aware(run.created_at),
        started_at=started_at,
        finished_at=_aware(run.finished_at)
        if status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        else None,
        last_attempted_at=last_attempted_at,
        args=source.get("args", spec["args"]),
        kwargs=source.get("kwargs", spec["kwargs"]),
        backend=spec["backend"],
        errors=errors,
        worker_ids=attempts.worker_ids,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", run.result)
    return result


def get_result(result_id: str) -> TaskResult:
    return result_of_run(find_run(result_id))


def result_of_run_id(run_id: str) -> TaskResult:
    from ..models import Run

    return result_of_run(Run.objects.get(id=run_id))
