"""Every error the engine raises, under one root.

    WorkflowError
    ├── CriticalError              a step failed for good: no retry (raise it from a step)
    ├── RetryAfter                 retry this step after `seconds` (e.g. a 429's Retry-After)
    ├── StepFailed                 a step failed terminally (kind: critical | timeout | exhausted)
    │   └── ChildFailed            a child run failed or was cancelled (kind: failed | cancelled)
    ├── ChildConflict              a child's key belongs to a run that is not this run's child
    ├── JoinError                  one or more join branches failed (errors by branch)
    ├── RaceError                  every race branch failed (errors by branch)
    ├── HistoryDiverged            the code asked for another entry than the history recorded
    ├── DuplicateEntryName         two entries with one name in one scope
    ├── NotRecordable              a value that cannot be stored as JSON
    │   └── ValueTooLarge          ... or is over the size limit (MAX_VALUE_BYTES)
    ├── InvalidKey                 a run key that is not a list of strings
    ├── UnknownWorkflow            no registered workflow has that name
    ├── UnknownQueue / UnknownEvent / UnknownAction
    ├── InvalidMessage             a message or event payload failed its schema
    ├── RunNotFound                no run with that id or key
    ├── EntryNotFound              no entry with that id in the run (a fork's starting point)
    ├── KeyTaken                   another run of the workflow holds that key (a fork's key)
    ├── RunFinished                the run is terminal (completed, failed or cancelled)
    ├── NotApplicable              an operator's repair that does not apply to the run as it is
    │   └── RunBusy                a repair needs the run at rest; a runner holds it now
    ├── NothingMatches             a bulk action's filter matches no run it applies to
    ├── OperationNotFound          no bulk operation with that id
    ├── MessageTimeout             a `send(..., wait=True)` got no completion in time
    ├── LeaseLost                  this runner no longer owns the run (another one took it over)
    └── StoreUnavailable           the store could not be reached or gave up on a transaction
                                   (connection lost, server restarting, serialization failure,
                                   deadlock, lock timeout): nothing of the call was kept; try again

`BadInput` marks the errors that describe a caller's mistake; the API maps them to 4xx.
"""

from __future__ import annotations

from typing import Any


class WorkflowError(Exception):
    """Root of the engine's errors."""


class BadInput(WorkflowError):
    """A caller's mistake: retrying the same call cannot succeed."""


class CriticalError(WorkflowError):
    """Raised by a step to fail it at once, with no retry."""


class RetryAfter(WorkflowError):
    """Raised by a step to retry it after `seconds` instead of the policy's backoff."""

    def __init__(self, seconds: float, message: str = "") -> None:
        self.seconds = max(0.0, float(seconds))
        super().__init__(message or f"retry after {self.seconds:g}s")


class StepFailed(WorkflowError):
    """A step failed terminally; raised into the workflow body (and on every replay of it)."""

    def __init__(self, step_name: str, kind: str, error: dict[str, Any]) -> None:
        self.step_name = step_name
        self.kind = kind  # "critical" | "timeout" | "exhausted"
        self.error = error
        super().__init__(f"step {step_name!r} failed ({kind}): {error.get('name')}: {error.get('message')}")


class ChildFailed(StepFailed):
    """A child run (`ctx.child`) ended failed or cancelled; raised into the parent's body (and on
    every replay of it). `error` is the child's error; `child_run_id` names the child."""

    def __init__(self, name: str, kind: str, error: dict[str, Any], child_run_id: str) -> None:
        self.child_run_id = child_run_id
        super().__init__(name, kind, error)
        self.args = (
            f"child {name!r} (run {child_run_id}) {kind}: {error.get('name')}: {error.get('message')}",
        )


class ChildConflict(WorkflowError):
    """`ctx.child` named a key that a run which is not this run's child already has."""


class JoinError(WorkflowError):
    """Raised by `ctx.join` after all branches settled, when any failed."""

    def __init__(self, name: str, errors: dict[str, dict[str, Any]]) -> None:
        self.name = name
        self.errors = errors
        summary = "; ".join(f"{b}: {e.get('name')}: {e.get('message')}" for b, e in errors.items())
        super().__init__(f"join {name!r}: {len(errors)} branch(es) failed ({summary})")


class RaceError(WorkflowError):
    """Raised by `ctx.race` when every branch failed."""

    def __init__(self, name: str, errors: dict[str, dict[str, Any]]) -> None:
        self.name = name
        self.errors = errors
        summary = "; ".join(f"{b}: {e.get('name')}: {e.get('message')}" for b, e in errors.items())
        super().__init__(f"race {name!r}: every branch failed ({summary})")


class HistoryDiverged(WorkflowError):
    """The workflow code asked for a different entry than the one recorded at this position."""

    def __init__(self, run_id: str, scope: str, position: int, expected: str, recorded: str) -> None:
        self.run_id = run_id
        self.scope = scope
        self.position = position
        self.expected = expected
        self.recorded = recorded
        where = f"scope {scope!r} " if scope else ""
        super().__init__(
            f"history diverged in run {run_id} at {where}position {position}: "
            f"the code asks for {expected}, the history recorded {recorded}"
        )


class DuplicateEntryName(BadInput):
    def __init__(self, name: str, scope: str) -> None:
        self.name = name
        self.scope = scope
        where = f" in scope {scope!r}" if scope else ""
        super().__init__(f"entry name {name!r} is used twice{where}; names must be unique per scope")


class NotRecordable(BadInput):
    """A value (step output, input, state, message, event, result) is not JSON."""


class ValueTooLarge(NotRecordable):
    """A value's JSON text is over the configured limit (`workflows.core.jsonvalue.max_bytes`)."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what = what
        self.size = size
        self.limit = limit
        self.detail = {"size": size, "limit": limit}
        super().__init__(f"{what} is {_bytes(size)} as JSON, over the limit of {_bytes(limit)}")


def _bytes(n: int) -> str:
    """A size for people: exact bytes, and MiB or KiB when that is shorter to read."""
    if n >= 1024 * 1024:
        return f"{n:,} bytes ({n / 1024 / 1024:.1f} MiB)"
    if n >= 1024:
        return f"{n:,} bytes ({n / 1024:.1f} KiB)"
    return f"{n:,} bytes"


class InvalidKey(BadInput):
    pass


class UnknownWorkflow(BadInput):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown workflow {name!r}")


class UnknownQueue(BadInput):
    def __init__(self, workflow: str, queue: str) -> None:
        self.workflow = workflow
        self.queue = queue
        super().__init__(f"workflow {workflow!r} has no queue {queue!r}")


class UnknownEvent(BadInput):
    def __init__(self, workflow: str, event: str) -> None:
        self.workflow = workflow
        self.event = event
        super().__init__(f"workflow {workflow!r} has no event {event!r}")


class UnknownAction(BadInput):
    def __init__(self, workflow: str, action: str) -> None:
        self.workflow = workflow
        self.action = action
        super().__init__(f"workflow {workflow!r} has no action {action!r}")


class InvalidMessage(BadInput):
    def __init__(self, target: str, detail: Any) -> None:
        self.target = target
        self.detail = detail  # as the schema gave it (the API answers it as `detail`)
        super().__init__(f"invalid payload for {target}: {_readable(detail)}")


def _readable(detail: Any) -> str:
    """A schema's refusal for people: `field: what is wrong; …` for pydantic's error list, never
    the Python repr of the list (an API message must not read `[{'loc': ('x',), …}]`)."""
    if isinstance(detail, list) and detail and all(isinstance(e, dict) for e in detail):
        parts = []
        for error in detail:
            where = ".".join(str(part) for part in error.get("loc") or ()) or "the value"
            parts.append(f"{where}: {error.get('msg') or error.get('type') or 'invalid'}")
        return "; ".join(parts)
    return str(detail)


class RunNotFound(WorkflowError):
    pass


class RunFinished(WorkflowError):
    pass


class NotApplicable(BadInput):
    """An operator's repair (replay, retry now, cancel) that does not apply to the run in its
    status (`workflows.core.repair_rules`): nothing changed and no audit entry was written. The
    message is the sentence that says why; the API answers 409 `not_applicable`."""

    def __init__(self, message: str, *, action: str = "", run_id: str = "", status: str = "") -> None:
        self.action = action
        self.run_id = run_id
        self.status = status
        self.detail = {"action": action, "runId": run_id, "status": status} if action else None
        super().__init__(message)


class EntryNotFound(BadInput):
    """No entry of that id in the run (an operator's fork from it): the API answers 404."""


class KeyTaken(BadInput):
    """The workflow already has a run of that key (a fork given a key another run holds): the API
    answers 409 `key_taken`, `detail` {"workflow", "key", "runId"} naming the run that holds it."""

    def __init__(self, message: str, *, workflow: str, key: list[str], run_id: str) -> None:
        self.detail = {"workflow": workflow, "key": key, "runId": run_id}
        super().__init__(message)


class RunBusy(NotApplicable):
    """The run is held by a runner right now; the operation needs it at rest."""


class NothingMatches(BadInput):
    """A bulk action was started on a filter that matches no run the action applies to: no
    operation is created (the API answers 409 `nothing_matches`; a preview says 0 instead)."""


class OperationNotFound(WorkflowError):
    """No bulk operation with that id."""


class MessageTimeout(WorkflowError):
    pass


class LeaseLost(WorkflowError):
    pass


class TransactionBodyFailed(WorkflowError):
    """A transaction step's body raised inside the commit's transaction: the store rolled it back
    whole, nothing of it or of the step's record was written. `error` is what the body raised."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        super().__init__(f"the transaction step's body raised {type(error).__name__}: {error}")


class StoreUnavailable(WorkflowError):
    """An infrastructure failure of the store, never a verdict on the run or the request: the
    engine abandons the execution as if the runner had crashed there, and the API answers 503."""
