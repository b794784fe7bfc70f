"""Operators' repairs of a run: replay from a step, retry a step now, cancel, send a message,
fork (a new run from the run's history up to an entry), and pause and resume (a run, a workflow). The same by filter, as a tracked bulk
operation, is `workflows.bulk.control` (which calls these).

Thin over the store's repair methods, which write each repair and its AuditEntry (who, when,
what, why) in one transaction. The admin, the API and the commands call these and nothing else,
so the three always agree. Each returns the run as stored after the repair.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from . import conf
from .core import forks, repair_rules
from .core.exceptions import BadInput, EntryNotFound, WorkflowError
from .core.jsonvalue import normalize, storable_text
from .core.pauses import WorkflowPauseRecord
from .core.records import CHILD_QUEUE_PREFIX, NOT_EDITED, Audit, AuditAction, OutgoingMessage
from .core.schedules import ScheduleRecord
from .engine.definition import Workflow
from .engine.registry import Registry
from .engine.schedules import Schedule
from .models import Entry, Event, Message, Run
from .storage.django.repairs import write_audit  # the Django store writes every audit entry
from .telemetry.tracing import producer_span

logger = logging.getLogger(__name__)


def _now() -> dt.datetime:
    """The database's time (`Store.shared_clock`): "retry now" or a resume is due when every
    runner thinks so, whatever the operator's web host's clock says."""
    return conf.default_store().shared_clock.now()


def replay_plan(run_id: str, entry_id: int) -> list[Entry]:
    """The entries a replay from `entry_id` would supersede, for a confirmation page."""
    entry = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
    if entry is None:
        raise BadInput(f"run {run_id} has no current entry {entry_id}")
    return list(
        Entry.objects.filter(
            run_id=run_id, scope=entry.scope, position__gte=entry.position, superseded=False
        ).order_by("position")
    )


def redelivery_plan(entries: list[Entry]) -> list[Message]:
    """The messages a replay superseding `entries` puts back on their queues, oldest first (the
    order they are delivered again in), for a confirmation page."""
    ids = [e.id for e in entries]
    if not ids:
        return []
    messages = Message.objects.filter(consumed_by_id__in=ids).exclude(queue__startswith=CHILD_QUEUE_PREFIX)
    return list(messages.order_by("id"))


def replay_from(
    run_id: str,
    entry_id: int,
    *,
    actor: str,
    reason: str = "",
    input: Any = None,
    edit_input: bool = False,
    redeliver: bool = True,
    bulk_operation: int | None = None,
) -> Run:
    """Run the run again from this entry: it and the entries after it in its scope become
    superseded history (kept, with their attempts); earlier entries, waits included, stay. With
    `edit_input`, the step reruns with `input` instead of its recorded one. The messages the
    superseded waits consumed are delivered again, in order, unless `redeliver` is False (the
    replayed waits then wait for new ones). The workflow's `on_repair` hears of it in the same
    transaction."""
    with transaction.atomic():
        conf.default_store().replay(
            str(run_id), entry_id, audit=Audit(actor=actor, reason=reason, bulk_operation=bulk_operation),
            now=_now(), input=input if edit_input else NOT_EDITED, redeliver=redeliver,
        )  # fmt: skip
        _on_repair(str(run_id), repair_rules.REPLAY, entry_id, actor=actor, reason=reason)
    return Run.objects.get(id=run_id)


def retry_now(
    run_id: str, entry_id: int, *, actor: str, reason: str = "", bulk_operation: int | None = None
) -> Run:
    """Skip the rest of a step's retry backoff: its next attempt is due now. The workflow's
    `on_repair` hears of it in the same transaction. `bulk_operation`: the bulk operation it is
    part of (its audit entry names it)."""
    audit = Audit(actor=actor, reason=reason, bulk_operation=bulk_operation)
    with transaction.atomic():
        conf.default_store().retry_now(str(run_id), entry_id, audit=audit, now=_now())
        _on_repair(str(run_id), repair_rules.RETRY_NOW, entry_id, actor=actor, reason=reason)
    return Run.objects.get(id=run_id)


def fork_run(
    run_id: str,
    entry_id: int,
    *,
    actor: str,
    reason: str = "",
    key: list[str] | None = None,
    input: Any = None,
    edit_input: bool = False,
) -> Run:
    """A new run from this run's history up to `entry_id` (a current entry of its root scope): the
    entries before it are copied with their results, attempts and consumed messages, it and the
    later ones run fresh (with `edit_input`, the step first with `input`). Same workflow, version,
    priority and state; its own id (so its own idempotency keys), under `key` or one derived from
    the original's (`<last part>~fork-<n>`). The original is only read; both runs' audit logs
    name the other. The fork's workflow's `on_repair` hears of it as action `fork` (from `step`),
    in the same transaction, so it can forget what the fresh steps will write again."""
    store = conf.default_store()
    with transaction.atomic():
        record = store.fork(
            str(run_id), entry_id, audit=Audit(actor=actor, reason=reason), now=_now(), key=key,
            input=input if edit_input else NOT_EDITED, group_of=_group_of(str(run_id)),
        )  # fmt: skip
        step = Entry.objects.filter(id=entry_id).values_list("name", flat=True).first() or ""
        _on_repair(record.id, forks.FORK, entry_id, actor=actor, reason=reason, step=step)
    return Run.objects.get(id=record.id)


def _group_of(run_id: str) -> Any:
    """The concurrency group a fork of `run_id` joins, by its workflow's declaration for the fork's
    key; None (keep the original's) when this server does not know the workflow."""
    try:
        run = Run.objects.filter(id=run_id).only("workflow", "version").first()
    except (ValidationError, ValueError, TypeError):  # not a UUID: the store answers RunNotFound
        run = None
    if run is None:
        return None
    try:
        definition = conf.registry().for_run(run.workflow, run.version)
    except WorkflowError:
        return None
    return lambda key: definition.group(run.workflow, key)


def fork_plan(run_id: str, entry_id: int) -> tuple[list[Entry], list[Entry]]:
    """For a confirmation page: the current root entries a fork from `entry_id` copies, and those
    it runs fresh (it and the later ones). EntryNotFound when the run has no such current entry."""
    entry = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
    if entry is None:
        raise EntryNotFound(f"run {run_id} has no current entry {entry_id}")
    roots = list(Entry.objects.filter(run_id=run_id, scope="", superseded=False).order_by("position"))
    return [e for e in roots if e.position < entry.position], [
        e for e in roots if e.position >= entry.position
    ]


class RepairContext:
    """`c` in a workflow's `on_repair(c, repair)`: the run's state to write, events to broadcast;
    both commit with the repair."""

    def __init__(self, run: Run, definition: Workflow) -> None:
        self._run = run
        self._definition = definition
        self.state: dict[str, Any] = copy.deepcopy(run.state or {})
        self.events: list[tuple[str, Any]] = []

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self._run.key)

    @property
    def run_id(self) -> str:
        return str(self._run.id)

    @property
    def status(self) -> str:
        return self._run.status

    def broadcast(self, event: str, payload: Any = None) -> None:
        spec = self._definition.event_spec(event, self._run.workflow)
        self.events.append((event, spec.validate(f"event {self._run.workflow}.{event}", payload)))


def _on_repair(
    run_id: str, action: str, entry_id: int, *, actor: str, reason: str, step: str | None = None
) -> None:
    """Call the run's workflow's `on_repair`, inside the repair's transaction (the run row is
    locked by it). An error in it is logged and changes nothing: the repair stands. `step`: the
    step's name when the run has no entry `entry_id` (a fork names the original's)."""
    run = Run.objects.select_for_update().get(id=run_id)
    try:
        definition = conf.registry().for_run(run.workflow, run.version)
    except WorkflowError:  # not in this server's registries: nothing to tell
        return
    if definition.on_repair is None:
        return
    if step is None:
        step = Entry.objects.filter(id=entry_id, run_id=run_id).values_list("name", flat=True).first() or ""
    c = RepairContext(run, definition)
    try:
        definition.on_repair(c, repair_rules.Repair(action=action, step=step, actor=actor, reason=reason))
        state = normalize(c.state, "the state on_repair wrote")
    except Exception:
        logger.exception("on_repair of %s (run %s) failed; the %s stands", run.workflow, run_id, action)
        return
    now = _now()
    Run.objects.filter(id=run.id).update(state=state)
    Event.objects.bulk_create(
        [Event(run_id=run.id, name=name, payload=payload, created_at=now) for name, payload in c.events]
    )


def cancel(run_id: str, *, actor: str, reason: str = "") -> Run:
    """A waiting run ends cancelled at once, a running one at its next entry."""
    conf.default_store().cancel(str(run_id), audit=Audit(actor=actor, reason=reason), now=_now())
    return Run.objects.get(id=run_id)


def pause_run(run_id: str, *, actor: str, reason: str = "", bulk_operation: int | None = None) -> Run:
    """A waiting run is paused at once (its due time kept), a running one at its next entry: its
    step in flight finishes and records its result first. No runner claims it until resumed."""
    audit = Audit(actor=actor, reason=reason, bulk_operation=bulk_operation)
    conf.default_store().pause(str(run_id), audit=audit, now=_now())
    return Run.objects.get(id=run_id)


def resume_run(run_id: str, *, actor: str, reason: str = "", bulk_operation: int | None = None) -> Run:
    """A paused run is due again at its kept due time, at once if that passed while it was paused."""
    audit = Audit(actor=actor, reason=reason, bulk_operation=bulk_operation)
    conf.default_store().resume(str(run_id), audit=audit, now=_now())
    return Run.objects.get(id=run_id)


def pause_workflow(name: str, *, actor: str, reason: str = "") -> WorkflowPauseRecord:
    """No run of workflow `name` is claimed until it is resumed; its runs running now stop at their
    next entry. Any name: a workflow this server does not declare may still have runs."""
    if not name or len(name) > 200:
        raise BadInput("a workflow name is 1 to 200 characters")
    return conf.default_store().pause_workflow(name, audit=Audit(actor=actor, reason=reason), now=_now())


def resume_workflow(name: str, *, actor: str, reason: str = "") -> WorkflowPauseRecord:
    """Its runs are claimed again (runs paused one by one stay paused)."""
    return conf.default_store().resume_workflow(name, audit=Audit(actor=actor, reason=reason), now=_now())


def paused_workflows() -> list[WorkflowPauseRecord]:
    return conf.default_store().paused_workflows()


def record_refusal(
    run_id: str, attempted: str, *, actor: str, reason: str = "", details: dict[str, Any]
) -> None:
    """Audit an operator's action refused for want of its permission (the admin's 403): an entry
    whose action is `refused`, never the attempted one, so the log cannot read as if it happened.
    `details` says what was attempted (`attempted`) and with what; nothing else changes. A
    vanished run leaves no entry (there is nothing to hang it on)."""
    if not Run.objects.filter(id=run_id).exists():
        return
    write_audit(
        str(run_id),
        AuditAction.REFUSED,
        # What a refused form held is recorded, not validated: escape what PostgreSQL cannot store.
        Audit(actor=storable_text(actor), reason=storable_text(reason)),
        {
            "attempted": attempted,
            **{k: storable_text(v) if isinstance(v, str) else v for k, v in details.items()},
        },
        _now(),
    )


def send(run_id: str, queue: str, body: Any, *, registry: Registry, actor: str, reason: str = "") -> int:
    """Send a message (e.g. an approval) to a run's queue, validated by its schema; returns its id."""
    store = conf.default_store()
    run = store.get_run(str(run_id))
    spec = registry.get(run.workflow).queue_spec(queue, run.workflow)
    body = spec.validate(f"queue {run.workflow}.{queue}", body)
    with producer_span("send", run.workflow, queue=queue, run_id=run.id) as producer:
        outgoing = OutgoingMessage(queue=queue, body=body, run_id=run.id, trace_context=producer.carrier)
        message = store.send(outgoing, now=_now(), audit=Audit(actor=actor, reason=reason))
        producer.produced(message_id=message.id)
    return message.id


def pause_schedule(name: str, *, paused: bool, actor: str, reason: str = "") -> ScheduleRecord:
    """Pause a schedule (no fire until resumed) or resume it: it fires next at its first fire time
    from now on, so the fire times passed while it was paused are not caught up."""
    store = conf.default_store()
    row = next((r for r in store.list_schedules() if r.name == name), None)
    if row is None:
        raise BadInput(f"no schedule named {name!r}")
    resume_at = None if paused else schedule_of(row).next_after(_now())
    return store.pause_schedule(
        name, paused=paused, actor=actor, reason=storable_text(reason), next_fire_at=resume_at, now=_now()
    )


def schedule_of(row: ScheduleRecord | Any) -> Schedule:
    """A stored schedule's fire times, whether or not this process's code declares it (a row or
    a ScheduleRecord)."""
    return Schedule(cron=row.cron, workflow=row.workflow, name=row.name, timezone=row.timezone)
