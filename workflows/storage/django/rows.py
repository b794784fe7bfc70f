"""Rows to records: the one place that knows how each backend returns the engine's columns (SQLite
keeps naive UTC times and JSON as text; PostgreSQL returns aware times and decoded jsonb)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from django.utils.dateparse import parse_datetime

from ...core.records import AuditRecord, EntryRecord, EventRecord, MessageRecord, RunRecord
from ...core.streams import ChunkRecord
from ...models import AuditEntry, Event, Message, Run, StreamChunk


def run_record(run: Run) -> RunRecord:
    return RunRecord(
        id=str(run.id),
        workflow=run.workflow,
        key=list(run.key),
        version=run.version,
        status=run.status,
        state=run.state,
        result=run.result,
        error=run.error,
        created_at=run.created_at,
        wake_at=run.wake_at,
        lease_owner=run.lease_owner,
        cancel_requested=run.cancel_requested,
        epoch=run.epoch,
        parent_id=str(run.parent_id) if run.parent_id else None,
        parent_queue=run.parent_queue or None,
        trace_context=run.trace_context,
        priority=run.priority,
        concurrency_group=run.concurrency_group,
    )


def message_record(m: Message) -> MessageRecord:
    return MessageRecord(
        id=m.id,
        run_id=str(m.run_id),
        queue=m.queue,
        body=m.body,
        sent_at=m.sent_at,
        response=m.response,
        completed_at=m.completed_at,
        consumed_at=m.consumed_at,
        trace_context=m.trace_context,
    )


RUN_COLUMNS = (
    "id", "workflow", "key", "version", "status", "state", "result", "error", "created_at", "wake_at",
    "lease_owner", "cancel_requested", "epoch", "parent_id", "parent_queue", "trace_context",
    "priority", "concurrency_group",
)  # fmt: skip


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def timestamp(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        parsed = value
    else:
        parsed = parse_datetime(str(value))
    if parsed is not None and parsed.tzinfo is None:  # SQLite keeps naive UTC
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def run_from_row(row: tuple[Any, ...], fresh: bool = False, taken_over: bool = False) -> RunRecord:
    """A RunRecord from a raw `RUN_COLUMNS` row, whatever types the backend returns."""
    values = dict(zip(RUN_COLUMNS, row, strict=True))
    return RunRecord(
        id=str(uuid.UUID(str(values["id"]))),
        workflow=values["workflow"],
        key=_json_value(values["key"]),
        version=values["version"],
        status=values["status"],
        state=_json_value(values["state"]),
        result=_json_value(values["result"]),
        error=_json_value(values["error"]),
        created_at=timestamp(values["created_at"]),
        wake_at=timestamp(values["wake_at"]),
        lease_owner=values["lease_owner"],
        cancel_requested=bool(values["cancel_requested"]),
        epoch=int(values["epoch"]),
        parent_id=str(uuid.UUID(str(values["parent_id"]))) if values["parent_id"] else None,
        parent_queue=values["parent_queue"] or None,
        trace_context=_json_value(values["trace_context"]),
        priority=int(values["priority"]),
        concurrency_group=values["concurrency_group"],
        fresh=fresh,
        taken_over=taken_over,
    )


ENTRY_FIELDS = (
    "id", "scope", "position", "name", "kind", "status", "input", "output", "error",
    "started_at", "finished_at", "wake_at", "attempts", "meta",
)  # fmt: skip


_ENTRY_JSON = frozenset({"input", "output", "error", "meta"})
_ENTRY_TIMES = frozenset({"started_at", "finished_at", "wake_at"})


def entry_from_row(row: tuple[Any, ...]) -> EntryRecord:
    """An EntryRecord from a raw `ENTRY_FIELDS` row."""
    values = dict(zip(ENTRY_FIELDS, row, strict=True))
    for name in _ENTRY_JSON:
        values[name] = _json_value(values[name])
    for name in _ENTRY_TIMES:
        values[name] = timestamp(values[name])
    return EntryRecord(**values)


MESSAGE_FIELDS = (
    "id", "run_id", "queue", "body", "sent_at", "response", "completed_at", "consumed_at", "trace_context",
)  # fmt: skip


def message_from_row(row: tuple[Any, ...]) -> MessageRecord:
    """A MessageRecord from a raw `MESSAGE_FIELDS` row."""
    v = dict(zip(MESSAGE_FIELDS, row, strict=True))
    return MessageRecord(
        id=int(v["id"]), run_id=str(uuid.UUID(str(v["run_id"]))), queue=v["queue"],
        body=_json_value(v["body"]), sent_at=timestamp(v["sent_at"]),  # type: ignore[arg-type]
        response=_json_value(v["response"]), completed_at=timestamp(v["completed_at"]),
        consumed_at=timestamp(v["consumed_at"]), trace_context=_json_value(v["trace_context"]),
    )  # fmt: skip


def event_record(e: Event) -> EventRecord:
    return EventRecord(
        id=e.id, run_id=str(e.run_id), name=e.name, payload=e.payload, created_at=e.created_at,
        step=e.step, attempt=e.attempt, lost=e.lost,
    )  # fmt: skip


def events_after(run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
    """The run's events with id > `after`, oldest first: the one read of "events after a cursor"
    that the client's `events()`, the API and the live consumers share."""
    rows = Event.objects.filter(run_id=run_id, id__gt=after).order_by("id")[:limit]
    return [event_record(e) for e in rows]


def chunks_after(run_id: str, stream: str | None, *, after: int = 0, limit: int = 1000) -> list[ChunkRecord]:
    """The run's stream chunks with id > `after` (of `stream`, or of all), oldest first: the one
    read the client's `stream()`, the Server-Sent Events and the live consumers share."""
    rows = StreamChunk.objects.filter(run_id=run_id, id__gt=after)
    if stream is not None:
        rows = rows.filter(stream=stream)
    return [chunk_record(c) for c in rows.order_by("id")[:limit]]


def chunk_record(c: StreamChunk) -> ChunkRecord:
    return ChunkRecord(
        id=c.id, stream=c.stream, data=c.data, step=c.step, attempt=c.attempt, seq=c.seq,
        created_at=c.created_at, scope=c.scope,
    )  # fmt: skip


def audit_record(a: AuditEntry) -> AuditRecord:
    return AuditRecord(
        run_id=str(a.run_id), action=a.action, actor=a.actor, reason=a.reason, details=a.details,
        created_at=a.created_at,
    )  # fmt: skip
