"""Django tasks, durably: a `django.tasks` backend (the django-tasks backport on Django 5.2) whose
every enqueued task is a durable run of the built-in workflow `django.task`.

    TASKS = {"default": {
        "BACKEND": "workflows.tasks.DurableBackend",
        "QUEUES": ["default", "emails"],          # validated at enqueue, as the framework does
        "OPTIONS": {"max_attempts": 3, "backoff": 2.0, "backoff_max": 300.0, "timeout": 600},
    }}

    @task(max_attempts=5, backoff=1.0, timeout=30)   # DurableBackend.task_class takes these
    def send_welcome(user_id): ...

    with transaction.atomic():                       # an outbox: the run exists iff this commits
        user = User.objects.create(...)
        result = send_welcome.enqueue(user.id)
    send_welcome.get_result(result.id).status         # READY / RUNNING / SUCCESSFUL / FAILED

The run's key is the result id and its state what was enqueued (the task's path, JSON args and
kwargs, queue, run_after, retry options); its one step imports and calls the task function, so a
task is recorded, retried, resumed after a crash, and shown (and repairable) in the inspector.
The runner serves it when `registry` (below) is one of the registries it serves.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.core import checks
from django.utils.module_loading import import_string
from django.utils.version import PY311

from ..core.exceptions import NotRecordable
from ..core.jsonvalue import normalize
from ..engine import defaults
from ..telemetry.tracing import producer_span
from .framework import (
    BaseTaskBackend,
    GenericTask,
    InvalidTaskBackendError,
    InvalidTaskError,
    Task,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task,
    task_enqueued,
)
from .results import WORKFLOW, get_result
from .workflow import TaskTimeout, registry, task_workflow

__all__ = [
    "WORKFLOW",
    "DurableBackend",
    "DurableTask",
    "TaskTimeout",
    "durable_backend_configured",
    "registry",
    "task",
]

T = TypeVar("T")
P = ParamSpec("P")

# The backend's OPTIONS, and what a task gets when neither it nor OPTIONS says otherwise.
DEFAULT_OPTIONS: dict[str, Any] = {
    "max_attempts": 1,  # one attempt: no retry, as django.tasks' own backends
    "backoff": 1.0,  # seconds: retry n waits min(backoff * 2**n, backoff_max)
    "backoff_max": 300.0,
    "timeout": None,  # seconds an attempt may run (None: no limit)
}

Backoff = float | tuple[float, float] | Callable[[BaseException, TaskResult], float | None]


@dataclass(frozen=True, slots=PY311, kw_only=True)  # type: ignore[literal-required]
class DurableTask(GenericTask[P, T]):
    """The framework's Task with the retry options proposed for Django (django/new-features#142):
    `@task(max_attempts=..., backoff=..., timeout=...)`. None takes the backend's OPTIONS. As in
    the proposal, `.using()` does not change them.

    backoff: seconds (the engine's exponential backoff: retry n waits min(backoff * 2**n,
    backoff_max)); a `(base, max)` pair; or a callable `backoff(exception, task_result)` returning
    the seconds before the next attempt, or None for no more attempts.
    """

    max_attempts: int | None = None
    backoff: Backoff | None = None
    timeout: float | None = None


def _number(value: Any, *, positive: bool = False) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and (value > 0 if positive else value >= 0)


def _problem(name: str, value: Any) -> str | None:
    """What is wrong with a retry option (None: nothing)."""
    if name == "max_attempts":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return f"max_attempts must be a whole number >= 1, not {value!r}"
    elif name == "backoff":
        pair = isinstance(value, tuple | list) and len(value) == 2 and all(_number(v) for v in value)
        if not (callable(value) or _number(value) or pair):
            return (
                "backoff must be seconds (>= 0), a (base, max) pair of seconds, or a callable "
                f"backoff(exception, task_result) -> seconds | None; not {value!r}"
            )
    elif name == "backoff_max":
        if not _number(value):
            return f"backoff_max must be seconds >= 0, not {value!r}"
    elif name == "timeout" and value is not None and not _number(value, positive=True):
        return f"timeout must be seconds > 0 or None, not {value!r}"
    return None


class DurableBackend(BaseTaskBackend):
    """Every task a durable run of `django.task` (see the module's docstring)."""

    task_class = DurableTask

    supports_defer = True  # run_after: a durable sleep before the step
    supports_async_task = True  # a coroutine function is awaited by the runner
    supports_get_result = True  # from the engine's tables, in any process
    supports_priority = True  # the task's priority is its run's: claims take higher first

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        unknown = set(self.options) - set(DEFAULT_OPTIONS)
        if unknown:
            raise InvalidTaskBackendError(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {sorted(unknown)}; "
                f"DurableBackend takes {sorted(DEFAULT_OPTIONS)}"
            )
        self.defaults = {**DEFAULT_OPTIONS, **self.options}
        for name, value in self.defaults.items():
            problem = _problem(name, value)
            if problem:
                raise InvalidTaskBackendError(f"TASKS[{alias!r}]['OPTIONS']: {problem}")
        if isinstance(self.defaults["backoff"], tuple | list):  # (base, max): max for every task
            self.defaults["backoff"], self.defaults["backoff_max"] = self.defaults["backoff"]

    # --- the framework's contract -------------------------------------------------------------------

    def validate_task(self, task: Task) -> None:
        """The framework's checks (module-level function, queue in QUEUES, a priority from -100
        to 100, aware run_after, a `context` first argument with takes_context), then the retry
        options."""
        super().validate_task(task)
        for name in ("max_attempts", "backoff", "timeout"):
            value = getattr(task, name, None)
            if value is not None:
                problem = _problem(name, value)
                if problem:
                    raise InvalidTaskError(problem)

    def enqueue(self, task: Task[P, T], args: Any, kwargs: Any) -> TaskResult[T]:
        """A run of `django.task`, created on the caller's connection: inside the caller's
        `transaction.atomic()`, the task exists iff that transaction commits."""
        self.validate_task(task)
        result, spec, now = self._prepare(task, args, kwargs)
        with producer_span("start", WORKFLOW) as producer:
            _create_run(result.id, spec, now, producer.carrier)
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Task[P, T], args: Any, kwargs: Any) -> TaskResult[T]:
        self.validate_task(task)
        await defaults.default_store().shared_clock.anow()  # read the database's time if due
        result, spec, now = self._prepare(task, args, kwargs)
        with producer_span("start", WORKFLOW) as producer:
            await defaults.default_store().run_sync(_create_run, result.id, spec, now, producer.carrier)
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The result as stored now; TaskResultDoesNotExist for an unknown id."""
        return get_result(result_id)

    # aget_result: the base class runs get_result in Django's sync thread.

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        yield from super().check(**kwargs)
        try:
            served = defaults.default_registry()  # the registries the app configured
        except Exception:  # a bad REGISTRIES entry: workflows.E003-E005 say which
            return  # (Django 6 runs the tasks framework's checks before the workflows app's)
        if WORKFLOW not in served:
            yield checks.Warning(
                f"TASKS[{self.alias!r}] is a DurableBackend, but the runner does not serve its "
                f"workflow {WORKFLOW!r}: tasks enqueued there will never run.",
                hint="workflows.conf.registry() adds workflows.tasks.registry when settings.TASKS names a "
                "DurableBackend: is this backend's class a DurableBackend?",
                id="workflows.tasks.W001",
            )

    # --- helpers --------------------------------------------------------------------------------------

    def retry_options(self, task: Task) -> dict[str, Any]:
        """The task's options over the backend's: what its run records and its step obeys."""
        options = dict(self.defaults)
        for name in ("max_attempts", "backoff", "timeout"):
            value = getattr(task, name, None)
            if value is not None:
                options[name] = value
        backoff = options["backoff"]
        if isinstance(backoff, tuple | list):
            options["backoff"], options["backoff_max"] = backoff
        elif callable(backoff):  # decided by the callable at each failure (see tasks_workflow)
            options["backoff"] = DEFAULT_OPTIONS["backoff"]  # only if the callable itself fails
        return {
            "max_attempts": int(options["max_attempts"]),
            "backoff": float(options["backoff"]),
            "backoff_max": float(options["backoff_max"]),
            "timeout": None if options["timeout"] is None else float(options["timeout"]),
        }

    def _prepare(self, task: Task, args: Any, kwargs: Any) -> tuple[TaskResult, dict[str, Any], dt.datetime]:
        _check_importable(task)
        now = defaults.default_store().shared_clock.now()  # due when every runner thinks it is
        # The framework's own JSON check (TypeError for a non-JSON type, ValueError for bytes that
        # are not UTF-8), then what JSON itself refuses (NaN, infinity) and PostgreSQL (NUL, lone surrogates).
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        try:
            args, kwargs = normalize(args, "the task's args"), normalize(kwargs, "the task's kwargs")
        except NotRecordable as exc:
            raise ValueError(str(exc)) from None
        result: TaskResult = TaskResult(
            task=task,
            id=str(uuid.uuid4()),
            status=TaskResultStatus.READY,
            enqueued_at=now,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        spec = {
            "task": task.module_path,
            "backend": self.alias,
            "queue_name": task.queue_name,
            "run_after": task.run_after.isoformat() if task.run_after else None,
            "enqueued_at": now.isoformat(),
            "priority": task.priority,
            "args": args,
            "kwargs": kwargs,
            "retry": self.retry_options(task),
        }
        return result, spec, now


def _create_run(
    result_id: str, spec: dict[str, Any], now: dt.datetime, trace_context: dict[str, str] | None = None
) -> None:
    """The task's run, as `DjangoStore.get_or_create_run` starts one, less its look-up of an
    existing run: a new result id (a uuid4) names none. On the caller's connection: inside the
    caller's transaction, if any."""
    from ..core.new_run import NewRun
    from ..storage.django.starts import start_run

    new = NewRun(
        workflow=WORKFLOW, key=[result_id], version=task_workflow.version, initial_state=spec,
        now=now, trace_context=trace_context, priority=spec.get("priority", 0),
    )  # fmt: skip
    start_run(new)


def _check_importable(task: Task) -> None:
    """A runner finds the task by its module path: it must name this very Task."""
    try:
        found = import_string(task.module_path)
    except ImportError:
        found = None
    if not isinstance(found, Task) or found.func is not task.func:
        raise InvalidTaskError(
            f"Task {task.module_path!r} cannot be found at its module path: define it with @task "
            "at the module level, under the name of its function."
        )


def durable_backend_configured() -> bool:
    """Whether any alias of settings.TASKS is a DurableBackend (the runner must then serve
    `registry`)."""
    from django.conf import settings

    for params in (getattr(settings, "TASKS", None) or {}).values():
        try:
            backend = import_string(params["BACKEND"])
        except (ImportError, KeyError, TypeError):
            continue
        if isinstance(backend, type) and issubclass(backend, DurableBackend):
            return True
    return False
