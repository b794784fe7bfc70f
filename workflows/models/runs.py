"""The runs' tables: a run, its entries (steps, waits, ...) and their attempts."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..core.ids import new_run_id
from ..core.records import EntryKind, EntryStatus, Outcome, RunStatus


def _choices(values: type[StrEnum]) -> list[tuple[str, str]]:
    """An enum of the core as field choices, labelled as TextChoices would label them."""
    return [(v.value, v.name.replace("_", " ").title()) for v in values]


class Run(models.Model):
    Status = RunStatus

    # Time-ordered (UUID version 7, `core.ids`): new runs sit together at the end of every index
    # their id leads, so a step's entry writes to pages already in memory and in the WAL.
    id = models.UUIDField(primary_key=True, default=new_run_id, editable=False)
    workflow = models.CharField(max_length=200)
    key = models.JSONField()
    key_text = models.TextField(help_text="The key as JSON text, for search.")
    key_hash = models.CharField(max_length=64, help_text="sha256 of key_text: the unique key.")
    version = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=_choices(RunStatus), default=RunStatus.PENDING)
    state = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    # Every commit moves `updated_at`; only a change of status, lease or an operator's action moves
    # `transitioned_at`. Only the latter is indexed (the dashboard's feed of changed runs reads it,
    # plus the few running runs by `updated_at`), so a step's commit changes no indexed column and
    # PostgreSQL updates the run row in place (a HOT update) instead of adding to every index.
    updated_at = models.DateTimeField()
    transitioned_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When a runner should next look at the run: its due time while pending or waiting, its lease
    # expiry while running, NULL when only a message can wake it or it is finished. One index on
    # it serves the claim query for new, due and stalled runs alike.
    wake_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    cancel_requested = models.BooleanField(default=False)
    epoch = models.PositiveIntegerField(
        default=0, help_text="Operator replays so far: part of every step's idempotency key."
    )
    # A child run (`ctx.child`): the run that started it, and the parent's internal queue that the
    # child's last commit reports its end on. No database constraint: pruning an old parent leaves
    # its child's link dangling rather than blocking the prune.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="children",
        db_index=False, db_constraint=False,
    )  # fmt: skip
    parent_queue = models.CharField(max_length=400, null=True, blank=True)  # NULL: no parent
    # A fork (`operations.fork_run`): the run whose history it copied, and the entry of that run it
    # started fresh from (its id; the entry is not a foreign key: pruning keeps no promise to it).
    # No database constraint, as for `parent`: the original may be pruned before its fork.
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="forks",
        db_index=False, db_constraint=False,
    )  # fmt: skip
    forked_from_entry = models.BigIntegerField(null=True, blank=True)
    trace_context = models.JSONField(
        null=True, blank=True, help_text="W3C trace context of the request that started the run (tracing on)."
    )
    # Claims take higher priority first, FIFO (due time, then id) within one (-100..100).
    priority = models.SmallIntegerField(default=0)
    # `workflow(..., concurrency=Concurrency(...))`: the group the run counts in, named at its
    # start ("<workflow>" or "<workflow>/<key>"); NULL for a workflow with no concurrency limit.
    concurrency_group = models.CharField(max_length=300, null=True, blank=True)
    # A run due while its group was full, set aside by a claim: `wake_at` NULL (out of the claim's
    # way), its due time kept here (its place in line). A run of its group leaving `running` puts
    # the first one back (wake_at = held_at).
    held_at = models.DateTimeField(null=True, blank=True)
    # Pause (`operations.pause_run`): a running run is asked (`pause_requested`, seen by its
    # runner's next commit) and stops at its next entry; an idle one is paused at once. A paused
    # run's due time (its timer, retry or first claim) waits in `paused_due_at`, wake_at NULL, so
    # no claim sees it; a resume puts it back (due at once if it fell due meanwhile).
    pause_requested = models.BooleanField(default=False, db_default=False)
    paused_due_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "key_hash"], name="workflows_run_unique_key"),
        ]
        indexes = [
            models.Index(fields=["wake_at"], name="workflows_run_wake", condition=Q(wake_at__isnull=False)),
            # The claim: a workflow's due runs in claim order (priority desc, due time, id).
            models.Index(
                fields=["workflow", "-priority", "wake_at", "id"],
                name="workflows_run_claim",
                condition=Q(wake_at__isnull=False),
            ),
            # Runs of concurrency groups executing now (the claim counts them per group).
            models.Index(
                fields=["concurrency_group", "wake_at"],
                name="workflows_run_executing",
                condition=Q(status=RunStatus.RUNNING, concurrency_group__isnull=False),
            ),
            # A group's runs with a wake time: those due in a full group, for the claim to set aside.
            models.Index(
                fields=["concurrency_group", "wake_at"],
                name="workflows_run_group_due",
                condition=Q(concurrency_group__isnull=False, wake_at__isnull=False),
            ),
            # Runs set aside in a full group, in the order they come back.
            models.Index(
                fields=["concurrency_group", "-priority", "held_at", "id"],
                name="workflows_run_held",
                condition=Q(held_at__isnull=False),
            ),
            models.Index(fields=["status", "-created_at"], name="workflows_run_status"),
            models.Index(fields=["workflow", "-created_at"], name="workflows_run_workflow"),
            models.Index(fields=["-created_at"], name="workflows_run_created"),
            models.Index(fields=["transitioned_at"], name="workflows_run_transitioned"),  # the live list
            models.Index(fields=["parent"], name="workflows_run_parent", condition=Q(parent__isnull=False)),
            models.Index(
                fields=["forked_from"],
                name="workflows_run_forked_from",
                condition=Q(forked_from__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow}{self.key} ({self.status})"

    def touch(self, now: dt.datetime) -> list[str]:
        """A change outside a step's commit (an operator's action, a cancel): both clocks move.
        Returns the fields to save."""
        self.updated_at = self.transitioned_at = now
        return ["updated_at", "transitioned_at"]


class Entry(models.Model):
    """A step record: one entry of a run's history (a step, a sleep, a queue wait...)."""

    Kind = EntryKind
    Status = EntryStatus

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="entries")
    scope = models.CharField(max_length=500, blank=True, default="")
    position = models.IntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=_choices(EntryKind))
    status = models.CharField(max_length=16, choices=_choices(EntryStatus))
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    meta = models.JSONField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(null=True, blank=True, help_text="Retry due, sleep end or wait deadline.")
    # An operator's replay keeps the old record as history and writes a new one in its place.
    superseded = models.BooleanField(default=False)

    class Meta:
        ordering = ["run", "scope", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "scope", "position"],
                condition=Q(superseded=False),
                name="workflows_entry_unique_position",
            ),
            models.UniqueConstraint(
                fields=["run", "scope", "name"],
                condition=Q(superseded=False),
                name="workflows_entry_unique_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.status})"

    def attempt_history(self) -> list[Attempt]:
        """Its attempts, oldest first (a prefetched `attempt_set` is used as it is). A step that
        succeeded at its first attempt in a new entry stores no attempt row (the store's
        `plain_commits.stored_attempt`): the entry says all of it, and it is given back here, unsaved."""
        attempts = list(self.attempt_set.all())
        if attempts or not self.implies_its_attempt():
            return attempts
        return [self.implied_attempt()]

    def implied_attempt(self) -> Attempt:
        """The first attempt of a step completed by it, as the store would have written it (unsaved)."""
        assert self.started_at is not None and self.finished_at is not None  # implies_its_attempt
        return Attempt(
            entry=self, number=1, started_at=self.started_at, finished_at=self.finished_at, outcome=Outcome.OK
        )

    def implies_its_attempt(self) -> bool:
        """Completed at its first attempt: with no attempt row stored, that attempt is implied."""
        return (
            self.kind == EntryKind.STEP
            and self.status == EntryStatus.COMPLETED
            and self.attempts == 1
            and self.started_at is not None
            and self.finished_at is not None
        )


def attempts_in_order() -> models.Prefetch:
    """An entry query's `prefetch_related` for `Entry.attempt_history`: each entry's stored
    attempts, oldest first."""
    return models.Prefetch("attempt_set", queryset=Attempt.objects.order_by("number", "id"))


def implied_attempts() -> Q:
    """Entries whose one attempt is implied (see `Entry.attempt_history`), for counting them."""
    stored = Attempt.objects.filter(entry=models.OuterRef("pk"))
    completed_first_try = Q(
        kind=EntryKind.STEP, status=EntryStatus.COMPLETED, attempts=1, started_at__isnull=False,
        finished_at__isnull=False,
    )  # fmt: skip
    return completed_first_try & ~Q(models.Exists(stored))


class Attempt(models.Model):
    Outcome = Outcome

    # No index of its own: (entry, number) below serves lookups and cascades (one less per step).
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="attempt_set", db_index=False)
    number = models.IntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=_choices(Outcome))
    error = models.JSONField(null=True, blank=True)
    delay = models.FloatField(null=True, blank=True, help_text="Seconds waited before the next attempt.")
    retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["entry", "number", "id"]
        indexes = [models.Index(fields=["entry", "number"], name="workflows_attempt_entry")]

    def __str__(self) -> str:
        return f"attempt {self.number} ({self.outcome})"
