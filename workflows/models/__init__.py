"""The engine's tables. Models hold data and constraints; `workflows.storage.django` writes
them (and nothing else does). Statuses, kinds and outcomes are the core's enums.

- `runs`: Run, Entry (a step, a wait, ... of a run) and Attempt, with the prefetch and filter
  that read attempts as history.
- `messages`: Message (sent to a run), Event (broadcast by it), StreamChunk (streamed by a step), AuditEntry (an operator's action).
- `operating`: RunnerPresence, ApiKey, Limiter and LimiterSlot, Schedule.
- `pauses`: WorkflowPause (a workflow no runner claims until resumed).
- `bulk`: BulkOperation (an operator's bulk action) and BulkTarget (a run it acts on).
"""

from .bulk import BulkOperation, BulkTarget
from .messages import AuditEntry, Event, Message, StreamChunk
from .operating import ApiKey, Limiter, LimiterSlot, RunnerPresence, Schedule
from .pauses import WorkflowPause
from .runs import Attempt, Entry, Run, attempts_in_order, implied_attempts

__all__ = [
    "ApiKey",
    "Attempt",
    "AuditEntry",
    "BulkOperation",
    "BulkTarget",
    "Entry",
    "Event",
    "Limiter",
    "LimiterSlot",
    "Message",
    "Run",
    "RunnerPresence",
    "Schedule",
    "StreamChunk",
    "WorkflowPause",
    "attempts_in_order",
    "implied_attempts",
]
