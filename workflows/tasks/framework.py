"""The tasks framework the backend plugs into: Django's own `django.tasks` from Django 6.0, its
backport `django_tasks` (the pinned django-tasks package) on Django 5.2. The rest of the package,
the tests and an app that wants to run on both import its names from here, so the choice is made
once. The type checker reads the backport's names (typed, and the one installed for it).

`task` is the framework's decorator with the backend's retry options besides its own keywords
(`@task(max_attempts=5, backoff=1.0, timeout=30)`): the backport passes extra keywords to the
backend's task class, Django 6.0's decorator takes none, so this one builds the task itself, as
both decorators do.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import django

if TYPE_CHECKING or django.VERSION < (6, 0):
    from django_tasks import task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import (
        InvalidTaskBackendError,
        InvalidTaskError,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import get_exception_traceback, normalize_json

    GenericTask = Task
else:  # Django 6: the framework is Django's own; two names differ, two helpers moved
    from django.tasks import task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_PRIORITY,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import InvalidTaskBackend as InvalidTaskBackendError
    from django.tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    def get_exception_traceback(exc: BaseException) -> str:
        return "".join(traceback.format_exception(exc))

    P_ = ParamSpec("P_")
    T_ = TypeVar("T_")

    class GenericTask(Task, Generic[P_, T_]):
        """Django 6's Task is not generic; the backend's task class is written as `Task[P, T]`."""

        __slots__ = ()


__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "BaseTaskBackend",
    "GenericTask",
    "InvalidTaskBackendError",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "get_exception_traceback",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]

P = ParamSpec("P")
T = TypeVar("T")


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options: Any,
) -> Any:
    """`@task` or `@task(...)`: the framework's decorator, plus the backend task class's options."""

    def wrapper(func: Callable[..., Any]) -> Any:
        return task_backends[backend].task_class(
            priority=priority,
            func=func,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,
            **options,
        )

    return wrapper(function) if function is not None else wrapper
