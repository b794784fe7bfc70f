"""Durable workflows for Django: the public API (DESIGN.md §2).

Importing this package never touches the database or Django's app registry.
"""

from .core.clock import Clock, FakeClock
from .core.concurrency import Concurrency
from .core.exceptions import (
    BadInput,
    ChildFailed,
    CriticalError,
    HistoryDiverged,
    InvalidKey,
    InvalidMessage,
    JoinError,
    MessageTimeout,
    NotApplicable,
    NotRecordable,
    RaceError,
    RetryAfter,
    RunFinished,
    RunNotFound,
    StepFailed,
    StoreUnavailable,
    UnknownAction,
    UnknownEvent,
    UnknownQueue,
    UnknownWorkflow,
    ValueTooLarge,
    WorkflowError,
)
from .core.limits import Limiter
from .core.values import ActionContext, ErrorEvent, Failure, Loop, Message, RaceResult, TryResult
from .engine.context import RunContext
from .engine.definition import OPERATOR, Workflow, event, queue, workflow
from .engine.registry import Registry, setup
from .engine.schedules import Schedule, ScheduleError, schedule
from .engine.step_context import ErrorContext, StepContext

__all__ = [
    "OPERATOR",
    "ActionContext",
    "BadInput",
    "ChildFailed",
    "Clock",
    "Concurrency",
    "CriticalError",
    "ErrorContext",
    "ErrorEvent",
    "Failure",
    "FakeClock",
    "HistoryDiverged",
    "InvalidKey",
    "InvalidMessage",
    "JoinError",
    "Limiter",
    "Loop",
    "Message",
    "MessageTimeout",
    "NotApplicable",
    "NotRecordable",
    "RaceError",
    "RaceResult",
    "Registry",
    "RetryAfter",
    "RunContext",
    "RunFinished",
    "RunNotFound",
    "Schedule",
    "ScheduleError",
    "StepContext",
    "StepFailed",
    "StoreUnavailable",
    "TryResult",
    "UnknownAction",
    "UnknownEvent",
    "UnknownQueue",
    "UnknownWorkflow",
    "ValueTooLarge",
    "Workflow",
    "WorkflowError",
    "event",
    "queue",
    "schedule",
    "setup",
    "workflow",
]
