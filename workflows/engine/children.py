"""Child runs: `await ctx.child(name, workflow, key, input)` starts another run and waits for its
end without holding anything.

The child is created by the same commit that records the parent's `child` entry (waiting), so it
exists exactly when the entry does: a crash between the two cannot start it twice or lose it.
The child carries its parent's id and an internal queue name; the commit that ends the child
(completed, failed or cancelled) sends its outcome to that queue, which wakes the parent as any
message does. The parent then records the outcome on the entry: a replay returns the child's
result, or raises `ChildFailed`, without asking the child again. A parent that ends cancelled or
failed asks its live children to cancel (compensations included), as Temporal's default
parent-close policy does.
"""

from __future__ import annotations

from typing import Any

from ..core.exceptions import ChildConflict, ChildFailed, RunNotFound
from ..core.jsonvalue import normalize
from ..core.keys import validate_key
from ..core.recorder import ChildRecorder
from ..core.records import (
    CHILD_QUEUE_PREFIX,
    TERMINAL,
    ChildStart,
    Commit,
    EntryKind,
    EntryStatus,
    EntryWrite,
    OutgoingMessage,
    RunRecord,
    RunStatus,
)
from ..core.replay import Action
from ..core.signals import Suspend


def child_queue(scope: str, name: str) -> str:
    """The parent's internal queue a child reports its end on: one per `child` entry."""
    return f"{CHILD_QUEUE_PREFIX}{scope}/{name}"


async def child(
    ex: ChildRecorder, scope: str, name: str, workflow: str, key: list[str] | tuple[str, ...], input: Any
) -> Any:
    target = ex.target(workflow)  # UnknownWorkflow: the body's mistake, the run fails with it
    key = validate_key(key)
    if input is not None:
        input = normalize(input, f"the input of child {name!r}")
    wanted = {"workflow": workflow, "key": key, "input": input}
    decision = ex.enter(scope, name, EntryKind.CHILD, input=wanted)
    if decision.action == Action.REPLAY:
        return _outcome(name, decision.value)
    queue = child_queue(scope, name)
    recorded = decision.recorded
    now = ex.clock.now()
    entry = EntryWrite(
        id=decision.entry_id,
        scope=scope,
        position=decision.position,
        name=name,
        kind=EntryKind.CHILD,
        status=EntryStatus.WAITING,
        input=recorded.input if recorded is not None else wanted,
        started_at=decision.started_at or now,
    )
    if recorded is None:
        existing = await ex.find_run(workflow, key)
        if existing is not None:
            if existing.parent_id != ex.run.id:
                raise ChildConflict(
                    f"child {name!r}: {workflow} run {existing.id} already has the key {key!r} and is not "
                    "a child of this run; give the child a key of its own"
                )
            if existing.status in TERMINAL:  # an operator replayed the parent past its finished child
                outcome = _report(existing.id, existing.status, existing.result, existing.error)
                entry.status, entry.finished_at, entry.output = EntryStatus.COMPLETED, now, outcome
                await ex.commit(Commit(entries=[(entry, None)]))
                return _outcome(name, outcome)
            ex.add_pending(entry)  # our child, still live (the parent was replayed): wait for it
            raise Suspend(None, (queue,))
        initial = target.initial_state()
        if input is not None:
            initial["input"] = input
        ex.add_pending_child(
            entry,
            ChildStart(
                workflow=workflow,
                key=key,
                version=target.version,
                initial_state=initial,
                parent_queue=queue,
                trace_context=ex.run.trace_context,
                priority=ex.run.priority,  # a child runs at its parent's priority
                concurrency_group=target.group(workflow, key),
            ),
        )
        raise Suspend(None, (queue,))
    available = await ex.available_messages([queue], 1)
    if not available:
        raise Suspend(None, (queue,))
    [message] = available
    entry.status, entry.finished_at = EntryStatus.COMPLETED, now
    entry.output = message.body
    entry.consumes = [message.id]
    await ex.commit(Commit(entries=[(entry, None)], complete=[(message.id, None)]))
    return _outcome(name, message.body)


def _report(run_id: str, status: str, result: Any, error: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"run_id": run_id, "status": status}
    if status == RunStatus.COMPLETED:
        body["result"] = result
    else:
        body["error"] = error or {"name": "Cancelled", "message": "the child run was cancelled"}
    return body


def _outcome(name: str, output: dict[str, Any]) -> Any:
    if output.get("status") == RunStatus.COMPLETED:
        return output.get("result")
    raise ChildFailed(name, str(output.get("status")), output.get("error") or {}, str(output.get("run_id")))


def report_to_parent(
    run: RunRecord, status: str, result: Any = None, error: Any = None
) -> list[OutgoingMessage]:
    """The message that tells a child's parent how the child ended, sent with the child's last
    commit (none for a run that is no child). Dropped if the parent has ended meanwhile."""
    if not run.parent_id or not run.parent_queue:
        return []
    body = _report(run.id, status, result, error)
    return [OutgoingMessage(queue=run.parent_queue, body=body, run_id=run.parent_id, drop_if_ended=True)]


async def cancel_live_children(ex: ChildRecorder) -> None:
    """Ask every child this run still waits for to cancel (a cancelled or failed parent). Done
    before the parent's last commit and idempotent: a crash in between does it again."""
    for entry in ex.history.entries_of_kind(EntryKind.CHILD):
        if entry.status != EntryStatus.WAITING or not isinstance(entry.input, dict):
            continue
        found = await ex.find_run(entry.input["workflow"], entry.input["key"])
        if found is None or found.status in TERMINAL or found.parent_id != ex.run.id:
            continue
        try:
            await ex.cancel_run(found.id)
        except RunNotFound:
            continue
