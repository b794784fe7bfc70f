"""A message stored and its run woken, as SQL (a send, or a commit's outgoing message)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction

from ...core.exceptions import RunFinished, RunNotFound
from ...core.keys import key_identity, quoted
from ...core.new_run import NewRun
from ...core.records import (
    TAKES_MESSAGES,
    TERMINAL,
    MessageRecord,
    OutgoingMessage,
    RunStatus,
)
from ...models import Run
from . import values
from .notify import NOTIFY_CHANNEL
from .prepared import hot_cursor
from .starts import create_run, message_values
from .statements import postgres, shared


def send_to_run(outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord:
    """PostgreSQL, a message to a run by id, on its own (no audit, no caller's transaction to
    join): one statement, as `insert_message` + notify would write it."""
    assert outgoing.run_id is not None
    rid = values.rid(outgoing.run_id)
    params = [
        RunStatus.PENDING, RunStatus.WAITING, values.t(now), outgoing.priority, rid, *TAKES_MESSAGES,
        *message_values(outgoing, now), NOTIFY_CHANNEL,
    ]  # fmt: skip
    with hot_cursor() as cursor:
        cursor.execute(postgres.SEND_TO_RUN, params)
        row = cursor.fetchone()
    if row is None:
        status = Run.objects.filter(id=outgoing.run_id).values_list("status", flat=True).first()
        if status is None:
            raise RunNotFound(f"no run with id {quoted(outgoing.run_id)}")
        raise RunFinished(f"run {outgoing.run_id} is {status}; it takes no more messages")
    return MessageRecord(
        id=row[0], run_id=outgoing.run_id, queue=outgoing.queue, body=outgoing.body, sent_at=now,
        trace_context=outgoing.trace_context or None,
    )  # fmt: skip


def insert_message(cursor: Any, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord | None:
    """Store a message and wake its run (created when it names a missing workflow and key); the
    caller holds a transaction. RunFinished when the target run has ended."""
    if outgoing.run_id is not None:
        target = Run.objects.filter(id=outgoing.run_id).values_list("id", "status").first()
        if target is None:
            raise RunNotFound(f"no run with id {quoted(outgoing.run_id)}")
    else:
        assert outgoing.workflow is not None and outgoing.key is not None
        found = Run.objects.filter(workflow=outgoing.workflow, key_hash=key_identity(outgoing.key)[1])
        target = found.values_list("id", "status").first()
        if target is None:
            with transaction.atomic():  # a savepoint: a concurrent creator wins, then we read it
                try:
                    run = create_run(NewRun.of_message(outgoing, now))
                    target = (run.id, run.status)
                except IntegrityError:
                    target = None
            if target is None:
                target = found.values_list("id", "status").first()
    assert target is not None
    run_pk, status = target
    if status in TERMINAL:
        if outgoing.drop_if_ended:
            return None
        raise RunFinished(f"run {run_pk} is {status}; it takes no more messages")
    rid = values.rid(str(run_pk))
    cursor.execute(
        shared.WAKE_FOR_MESSAGE,
        [RunStatus.PENDING, RunStatus.WAITING, values.t(now), outgoing.priority, rid, *TAKES_MESSAGES],
    )
    if cursor.rowcount != 1:
        if outgoing.drop_if_ended:
            return None
        raise RunFinished(f"run {run_pk} finished; it takes no more messages")
    cursor.execute(shared.INSERT_MESSAGE, [rid, *message_values(outgoing, now)])
    return MessageRecord(
        id=cursor.fetchone()[0], run_id=str(run_pk), queue=outgoing.queue, body=outgoing.body, sent_at=now,
        trace_context=outgoing.trace_context or None,
    )  # fmt: skip
