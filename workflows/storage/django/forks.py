"""An operator's fork as a store method: a new run from another run's history up to an entry, in
one transaction with its audit entries on both runs (`workflows.core.forks` has the rules).

What the fork gets: the original's workflow, version, priority and state; its current root entries
before the fork point, with their nested scopes (branches, loop iterations, blocks), results and
attempts; and copies of the messages those entries consumed, each already answered (a fork never
answers the original's sender). What it does not get: the entries from the fork point on (they
run fresh), the original's events, streams, unconsumed messages and audit log. The original is
only read (its row locked while it is copied, so a runner's commit cannot land halfway through).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from ...core import forks
from ...core.exceptions import BadInput, EntryNotFound, KeyTaken, NotApplicable
from ...core.jsonvalue import normalize
from ...core.keys import key_identity, quoted, validate_key
from ...core.records import (
    CHILD_QUEUE_PREFIX,
    NOT_EDITED,
    Audit,
    AuditAction,
    EntryKind,
    EntryStatus,
    RunRecord,
    RunStatus,
)
from ...models import Attempt, Entry, Message, Run
from .notify import notify_now
from .repairs import locked_run, write_audit
from .rows import run_record

ENTRY_COPIED = (
    "scope", "position", "name", "kind", "status", "input", "output", "error", "meta", "attempts",
    "started_at", "finished_at", "wake_at",
)  # fmt: skip
ATTEMPT_COPIED = ("number", "started_at", "finished_at", "outcome", "error", "delay", "retry_at")


def _refuse(run: Run, message: str) -> NotApplicable:
    return NotApplicable(message, action=forks.FORK, run_id=str(run.id), status=str(run.status))


def _fork_point(run: Run, entry_id: int) -> Entry:
    """The entry to fork from: of this run (else EntryNotFound), current and in the root scope
    (else NotApplicable, naming the root entry a nested one belongs to)."""
    entry = Entry.objects.filter(id=entry_id, run_id=run.id).first()
    if entry is None:
        raise EntryNotFound(f"run {quoted(str(run.id))} has no entry {entry_id}")
    if entry.superseded:
        raise _refuse(run, forks.superseded_refusal(entry.name))
    if entry.scope:
        roots = Entry.objects.filter(run_id=run.id, scope="", superseded=False).values_list("name", flat=True)
        raise _refuse(
            run, forks.nested_refusal(entry.name, entry.scope, forks.root_owner(entry.scope, roots))
        )
    return entry


def _copied_entries(run: Run, point: Entry) -> list[Entry]:
    """The current entries a fork from `point` copies: the root ones before it and everything nested
    under them, in history order; NotApplicable when one of them has not finished."""
    current = list(Entry.objects.filter(run_id=run.id, superseded=False).order_by("scope", "position"))
    roots = {e.name for e in current if not e.scope}
    copied_roots = {e.name for e in current if not e.scope and e.position < point.position}
    copied = [
        e
        for e in current
        if (e.position < point.position if not e.scope else forks.root_owner(e.scope, roots) in copied_roots)
    ]
    unfinished = next((e for e in copied if e.status not in forks.FINISHED), None)
    if unfinished is not None:
        raise _refuse(run, forks.unfinished_refusal(unfinished.name, unfinished.status, point.name))
    return copied


def _fork_key(run: Run, key: list[str] | None) -> list[str]:
    """The chosen key (KeyTaken when another run of the workflow holds it), else the first free
    derived one."""

    def holder(candidate: list[str]) -> Run | None:
        return Run.objects.filter(workflow=run.workflow, key_hash=key_identity(candidate)[1]).first()

    if key is None:
        return forks.first_free_key(list(run.key), lambda k: holder(k) is not None, run.forks.count() + 1)
    key = validate_key(key)
    taken = holder(key)
    if taken is not None:
        raise KeyTaken(
            f"{run.workflow} run {taken.id} already has the key {quoted(key)}; choose another key "
            "for the fork, or leave it out to get one derived from the original's",
            workflow=run.workflow, key=key, run_id=str(taken.id),
        )  # fmt: skip
    return key


def _new_run(
    run: Run, key: list[str], point: Entry, group: str | None, now: dt.datetime, *, has_history: bool
) -> Run:
    """The fork's row, runnable now. With copied history it counts as started (`started_at`): a
    claim reads the history only of a run that ran before, and this one's history is there."""
    key_text, key_hash = key_identity(key)
    fork = Run(
        workflow=run.workflow, key=key, key_text=key_text, key_hash=key_hash, version=run.version,
        status=RunStatus.PENDING, state=run.state, created_at=now, updated_at=now, transitioned_at=now,
        started_at=now if has_history else None, wake_at=now, priority=run.priority,
        concurrency_group=group, forked_from=run, forked_from_entry=point.id,
    )  # fmt: skip
    try:
        with transaction.atomic():  # a savepoint: a key taken since the check is KeyTaken, not a 500
            fork.save(force_insert=True)
    except IntegrityError:
        raise KeyTaken(
            f"{run.workflow} already has a run of the key {quoted(key)}; choose another key for the fork",
            workflow=run.workflow, key=key, run_id="",
        ) from None  # fmt: skip
    return fork


def _copy_history(fork: Run, entries: list[Entry]) -> dict[str, Any]:
    """Copy `entries` with their attempts and the messages they consumed into `fork`; returns what
    the audit entries say of it."""
    copies = [Entry(run=fork, **{f: getattr(e, f) for f in ENTRY_COPIED}) for e in entries]
    Entry.objects.bulk_create(copies)
    new_id = {old.id: new.id for old, new in zip(entries, copies, strict=True)}
    Attempt.objects.bulk_create(
        Attempt(entry_id=new_id[a.entry_id], **{f: getattr(a, f) for f in ATTEMPT_COPIED})
        for a in Attempt.objects.filter(entry_id__in=list(new_id)).order_by("id")
    )
    consumed = list(
        Message.objects.filter(consumed_by_id__in=list(new_id))
        .exclude(queue__startswith=CHILD_QUEUE_PREFIX)
        .order_by("id")
    )
    message_copies = [
        Message(
            run=fork,
            queue=m.queue,
            body=m.body,
            sent_at=m.sent_at,
            consumed_at=m.consumed_at,
            consumed_by_id=new_id[m.consumed_by_id],
            response=m.response,
            completed_at=m.completed_at or m.consumed_at,
            trace_context=m.trace_context,
        )
        for m in consumed
        if m.consumed_by_id is not None
    ]
    Message.objects.bulk_create(message_copies)
    new_message = {old.id: new.id for old, new in zip(consumed, message_copies, strict=True)}
    for copy in copies:  # a copied wait hands its copies of the messages to the fork's body
        if copy.kind == EntryKind.QUEUE and isinstance(copy.output, dict) and new_message:
            for m in copy.output.get("messages") or []:
                m["id"] = new_message.get(m.get("id"), m.get("id"))
            Entry.objects.filter(id=copy.id).update(output=copy.output)
    return {"copied": [e.id for e in entries], "messages_copied": len(message_copies)}


class DjangoForks:
    def fork(
        self,
        run_id: str,
        entry_id: int,
        *,
        audit: Audit,
        now: dt.datetime,
        key: list[str] | None = None,
        input: Any = NOT_EDITED,
        group_of: Callable[[list[str]], str | None] | None = None,
    ) -> RunRecord:
        edited = input is not NOT_EDITED
        if edited:  # refused before the transaction starts
            input = normalize(input, "the edited input")
        with transaction.atomic():
            run = locked_run(run_id)  # only read: locked so that no commit lands mid-copy
            point = _fork_point(run, entry_id)
            if edited and point.kind != EntryKind.STEP:
                raise BadInput("only a step's input can be edited")
            entries = _copied_entries(run, point)
            key = _fork_key(run, key)
            group = group_of(key) if group_of is not None else run.concurrency_group
            fork = _new_run(run, key, point, group, now, has_history=bool(entries) or edited)
            details = {"from_entry": point.id, "from_step": point.name, **_copy_history(fork, entries)}
            if edited:  # the step runs first with the operator's input (as a replay's edit does)
                Entry.objects.create(
                    run=fork, scope="", position=point.position, name=point.name, kind=point.kind,
                    status=EntryStatus.RETRYING, input=input, attempts=0, wake_at=now,
                )  # fmt: skip
                details["input"] = input
            write_audit(str(fork.id), AuditAction.FORK, audit, {"forked_from": str(run.id), **details}, now)
            write_audit(
                str(run.id), AuditAction.FORK, audit,
                {"fork": str(fork.id), "key": key, "from_entry": point.id, "from_step": point.name}, now,
            )  # fmt: skip
            notify_now()
        return run_record(fork)
