"""Durable workflows for Django: the public API.

What an app needs to define, start and follow runs is here; the HTTP helpers are in
`workflows.http`, the models in `workflows.models`, the test helpers in `workflows.testing`.

Importing this package never touches the database or Django's app registry.
"""

from .core.clock import Clock, FakeClock
from .core.concurrency import Concurrency
from .core.durations import format_duration
from .core.exceptions import (
    BadInput,
    ChildFailed,
    CriticalError,
    EntryNotFound,
    HistoryDiverged,
    InvalidKey,
    InvalidMessage,
    JoinError,
    KeyTaken,
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
from .core.records import LOST_EVENTS, TERMINAL, EntryStatus, EventRecord, RunRecord, RunStatus
from .core.streams import ChunkRecord, StreamClosed, latest_attempts, text_of
from .core.values import ActionContext, ErrorEvent, Failure, Loop, Message, RaceResult, TryResult
from .engine.client import RunHandle, WorkflowClient
from .engine.context import RunContext
from .engine.definition import OPERATOR, Workflow, event, queue, workflow
from .engine.registry import Registry, setup
from .engine.schedules import Schedule, ScheduleError, schedule
from .engine.step_context import ErrorContext, StepContext

__all__ = [
    "LOST_EVENTS",
    "OPERATOR",
    "TERMINAL",
    "ActionContext",
    "BadInput",
    "ChildFailed",
    "ChunkRecord",
    "Clock",
    "Concurrency",
    "CriticalError",
    "EntryNotFound",
    "EntryStatus",
    "ErrorContext",
    "ErrorEvent",
    "EventRecord",
    "Failure",
    "FakeClock",
    "HistoryDiverged",
    "InvalidKey",
    "InvalidMessage",
    "JoinError",
    "KeyTaken",
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
    "RunHandle",
    "RunNotFound",
    "RunRecord",
    "RunStatus",
    "Schedule",
    "ScheduleError",
    "StepContext",
    "StepFailed",
    "StoreUnavailable",
    "StreamClosed",
    "TryResult",
    "UnknownAction",
    "UnknownEvent",
    "UnknownQueue",
    "UnknownWorkflow",
    "ValueTooLarge",
    "Workflow",
    "WorkflowClient",
    "WorkflowError",
    "event",
    "format_duration",
    "latest_attempts",
    "queue",
    "schedule",
    "setup",
    "text_of",
    "workflow",
]
