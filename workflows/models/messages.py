"""What passes to and from a run: the messages sent to it, the events it broadcasts, and the
operators' audit log of it."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ..core.records import AuditAction
from .runs import Entry, Run, _choices


class Message(models.Model):
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="messages", db_index=False
    )  # (run, id)
    queue = models.CharField(max_length=200)
    body = models.JSONField(null=True, blank=True)
    sent_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by = models.ForeignKey(
        Entry, null=True, blank=True, on_delete=models.SET_NULL, related_name="consumed_messages"
    )
    response = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    trace_context = models.JSONField(
        null=True, blank=True, help_text="W3C trace context of the sender (tracing on)."
    )

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

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)  # (run, id)
    name = models.CharField(max_length=200)
    payload = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    # Broadcast by a running step (blank for the body's and on_error's events): which attempt.
    scope = models.CharField(max_length=500, blank=True, default="")
    step = models.CharField(max_length=200, blank=True, default="")
    attempt = models.PositiveIntegerField(null=True, blank=True)
    lost = models.BooleanField(
        default=False, help_text="Broadcast by an attempt that a crash or a store failure cut off."
    )

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="workflows_event_run")]

    def __str__(self) -> str:
        return f"{self.name} #{self.id}"


class StreamChunk(models.Model):
    """A chunk a running step wrote to one of the run's streams; its id is the cursor readers
    resume after. `seq` 0 starts an attempt's text over (`workflows.core.streams`)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="stream_chunks", db_index=False)
    stream = models.CharField(max_length=200)
    data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    scope = models.CharField(max_length=500, blank=True, default="")
    step = models.CharField(max_length=200)
    attempt = models.PositiveIntegerField()
    seq = models.PositiveIntegerField(help_text="Its place among its attempt's chunks of this stream.")

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "stream", "id"], name="workflows_chunk_stream")]

    def __str__(self) -> str:
        return f"{self.stream} #{self.id}"


class AuditEntry(models.Model):
    """An operator's action on a run: who, when, what, why. Written with the change it records."""

    Action = AuditAction

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="audit_entries", db_index=False)
    action = models.CharField(max_length=32, choices=_choices(AuditAction))
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
