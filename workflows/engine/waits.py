"""Durable waits: `sleep` / `sleep_until` and queue waits. A wait that is not satisfied records
its entry and suspends the run (Suspend), so a waiting run holds no coroutine, thread or lease.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..core.jsonvalue import normalize
from ..core.recorder import Recorder
from ..core.records import Commit, EntryKind, EntryStatus, EntryWrite
from ..core.replay import Action
from ..core.signals import Suspend
from ..core.values import Message


async def sleep(
    ex: Recorder, scope: str, name: str, *, seconds: float | None = None, until: dt.datetime | None = None
) -> None:
    if until is not None and until.tzinfo is None:
        raise ValueError(f"sleep_until {name!r}: give an aware datetime (with a timezone)")
    decision = ex.enter(scope, name, EntryKind.SLEEP)
    if decision.action == Action.REPLAY:
        return
    if decision.action == Action.WAIT:  # recorded, not due yet: a replay never extends it
        raise Suspend(decision.until)
    now = ex.clock.now()
    recorded = decision.recorded
    if recorded is not None:
        wake = recorded.wake_at or now
    else:
        wake = until if until is not None else now + dt.timedelta(seconds=max(0.0, float(seconds or 0)))
    entry = EntryWrite(
        id=decision.entry_id,
        scope=scope,
        position=decision.position,
        name=name,
        kind=EntryKind.SLEEP,
        status=EntryStatus.WAITING,
        input=decision.input if recorded is not None else {"until": wake.isoformat()},
        started_at=decision.started_at or now,
        wake_at=wake,
    )
    if now >= wake:
        entry.status, entry.finished_at = EntryStatus.COMPLETED, now
        ex.add_pending(entry)
        return
    if recorded is None:
        ex.add_pending(entry)
    raise Suspend(wake)


async def queue_wait(
    ex: Recorder,
    scope: str,
    name: str,
    names: list[str] | None,
    *,
    count: int,
    timeout: float | None,
    completable: bool,
) -> list[Message]:
    for queue_name in names or []:
        ex.check_queue(queue_name)
    wait_input = {"queues": names, "count": count, "timeout": timeout, "completable": completable}
    decision = ex.enter(scope, name, EntryKind.QUEUE, input=wait_input)
    if decision.action == Action.REPLAY:
        return _messages(ex, decision.value, completable)
    now = ex.clock.now()
    recorded = decision.recorded
    if recorded is not None:
        deadline, started = recorded.wake_at, recorded.started_at
    else:
        deadline = now + dt.timedelta(seconds=max(0.0, timeout)) if timeout is not None else None
        started = now
    entry = EntryWrite(
        id=decision.entry_id,
        scope=scope,
        position=decision.position,
        name=name,
        kind=EntryKind.QUEUE,
        status=EntryStatus.WAITING,
        input=wait_input,
        started_at=started,
        wake_at=deadline,
    )
    available = await ex.available_messages(names, count)
    if available or (deadline is not None and now >= deadline):
        entry.status, entry.finished_at = EntryStatus.COMPLETED, now
        entry.output = {
            "messages": [
                {"id": m.id, "queue": m.queue, "body": m.body, "sent_at": m.sent_at.isoformat()}
                for m in available
            ]
        }
        entry.consumes = [m.id for m in available]
        entry.consumed_contexts = [m.trace_context for m in available if m.trace_context]
        commit = Commit(entries=[(entry, None)])
        if not completable:  # a sender waiting for a reply gets None rather than a timeout
            commit.complete = [(m.id, None) for m in available]
        if not ex.commit_early(commit):  # the body goes on during the round trip when it may
            await ex.commit(commit)
        return _messages(ex, entry.output, completable)
    if recorded is None:
        ex.add_pending(entry)
    raise Suspend(deadline, tuple(names) if names else ())


def _messages(ex: Recorder, output: Any, completable: bool) -> list[Message]:
    async def complete(message_id: int, response: Any) -> None:
        response = normalize(response, f"the response to message {message_id}")
        await ex.commit(Commit(complete=[(message_id, response)]))

    return [
        Message(
            id=m["id"],
            queue=m["queue"],
            body=m["body"],
            sent_at=m["sent_at"],
            completable=completable,
            _complete=complete,
        )
        for m in (output or {}).get("messages", [])
    ]
