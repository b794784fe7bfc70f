"""Durable workflows for Django: the public API (DESIGN.md §2).

Importing this package never touches the database or Django's app registry.
"""

from .clock import Clock, FakeClock
from .context import ActionContext, ErrorContext, ErrorEvent, Message, RunContext, StepContext
from .definition import Registry, Workflow, event, queue, setup, workflow
from .exceptions import (
    BadInput,
    CriticalError,
    HistoryDiverged,
    InvalidKey,
    InvalidMessage,
    MessageTimeout,
    NotRecordable,
    RetryAfter,
    RunFinished,
    RunNotFound,
    StepFailed,
    UnknownAction,
    UnknownEvent,
    UnknownQueue,
    UnknownWorkflow,
    WorkflowError,
)

__all__ = [
    "ActionContext",
    "BadInput",
    "Clock",
    "CriticalError",
    "ErrorContext",
    "ErrorEvent",
    "FakeClock",
    "HistoryDiverged",
    "InvalidKey",
    "InvalidMessage",
    "Message",
    "MessageTimeout",
    "NotRecordable",
    "Registry",
    "RetryAfter",
    "RunContext",
    "RunFinished",
    "RunNotFound",
    "StepContext",
    "StepFailed",
    "UnknownAction",
    "UnknownEvent",
    "UnknownQueue",
    "UnknownWorkflow",
    "Workflow",
    "WorkflowError",
    "event",
    "queue",
    "setup",
    "workflow",
]
