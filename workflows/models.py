"""The engine's tables. Models hold data and constraints; the store (django_store.py) writes them."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from .records import EntryKind, EntryStatus, RunStatus


class Run(models.Model):
    class Status(models.TextChoices):
        PENDING = RunStatus.PENDING
        RUNNING = RunStatus.RUNNING
        WAITING = RunStatus.WAITING
        COMPLETED = RunStatus.COMPLETED
        FAILED = RunStatus.FAILED
        CANCELLED = RunStatus.CANCELLED

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow = models.CharField(max_length=200)
    key = models.JSONField()
    key_text = models.TextField(help_text="The key as JSON text, for search.")
    key_hash = models.CharField(max_length=64, help_text="sha256 of key_text: the unique key.")
    version = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    state = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When a runner should next look at the run: its due time while pending or waiting, its lease
    # expiry while running, NULL when only a message can wake it or it is finished. One index on
    # it serves the claim query for new, due and stalled runs alike.
    wake_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    cancel_requested = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "key_hash"], name="workflows_run_unique_key"),
        ]
        indexes = [
            models.Index(fields=["wake_at"], name="workflows_run_wake", condition=Q(wake_at__isnull=False)),
            models.Index(fields=["status", "-created_at"], name="workflows_run_status"),
            models.Index(fields=["workflow", "-created_at"], name="workflows_run_workflow"),
            models.Index(fields=["-created_at"], name="workflows_run_created"),
            models.Index(fields=["updated_at"], name="workflows_run_updated"),  # the dashboard's live list
        ]

    def __str__(self) -> str:
        return f"{self.workflow}{self.key} ({self.status})"


class Entry(models.Model):
    """A step record: one entry of a run's history (a step, a sleep, a queue wait...)."""

    class Kind(models.TextChoices):
        STEP = EntryKind.STEP
        SLEEP = EntryKind.SLEEP
        QUEUE = EntryKind.QUEUE
        JOIN = EntryKind.JOIN
        RACE = EntryKind.RACE
        LOOP = EntryKind.LOOP
        TRY = EntryKind.TRY
        CHECKPOINT = EntryKind.CHECKPOINT
        VERSION = EntryKind.VERSION

    class Status(models.TextChoices):
        COMPLETED = EntryStatus.COMPLETED
        FAILED = EntryStatus.FAILED
        RETRYING = EntryStatus.RETRYING
        WAITING = EntryStatus.WAITING
        RUNNING = EntryStatus.RUNNING

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="entries")
    scope = models.CharField(max_length=500, blank=True, default="")
    position = models.IntegerField()
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
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


class Attempt(models.Model):
    class Outcome(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        TIMEOUT = "timeout"
        CRITICAL = "critical"

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="attempt_set")
    number = models.IntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error = models.JSONField(null=True, blank=True)
    delay = models.FloatField(null=True, blank=True, help_text="Seconds waited before the next attempt.")
    retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["entry", "number", "id"]
        indexes = [models.Index(fields=["entry", "number"], name="workflows_attempt_entry")]

    def __str__(self) -> str:
        return f"attempt {self.number} ({self.outcome})"


class Message(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages")
    queue = models.CharField(max_length=200)
    body = models.JSONField(null=True, blank=True)
    sent_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by = models.ForeignKey(
        Entry, null=True, blank=True, on_delete=models.SET_NULL, related_name="consumed_messages"
    )
    response = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["run", "queue", "id"],
                name="workflows_message_pending",
                condition=Q(consumed_at__isnull=True),
            ),
            models.Index(fields=["run", "id"], name="workflows_message_run"),
        ]

    def __str__(self) -> str:
        return f"message {self.id} to {self.queue}"


class Event(models.Model):
    """A broadcast event; its id is the cursor clients resume after."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    name = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="workflows_event_run")]

    def __str__(self) -> str:
        return f"{self.name} #{self.id}"


class AuditEntry(models.Model):
    """An operator's action on a run: who, when, what, why. Written with the change it records."""

    class Action(models.TextChoices):
        REPLAY = "replay"
        RETRY_NOW = "retry_now"
        CANCEL = "cancel"
        SEND = "send"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="audit_entries")
    action = models.CharField(max_length=32, choices=Action.choices)
    actor = models.CharField(max_length=200, help_text="User name, API key name or command.")
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["run", "-created_at"], name="workflows_audit_run")]

    def __str__(self) -> str:
        return f"{self.action} on {self.run_id} by {self.actor}"


class ApiKey(models.Model):
    """A key for the /api/ routes. Only its sha256 is stored; the key itself is shown once."""

    name = models.CharField(max_length=100, unique=True, help_text="Who or what uses the key.")
    prefix = models.CharField(
        max_length=8, db_index=True, editable=False, help_text="The key's first 8 characters."
    )
    hashed_key = models.CharField(max_length=64, unique=True, editable=False, help_text="sha256 of the key.")
    created_at = models.DateTimeField(editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.BooleanField(default=False, help_text="A revoked key is refused.")

    class Meta:
        verbose_name = "API key"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
