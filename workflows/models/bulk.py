"""Operators' bulk actions (cancel, replay, retry now... of every run a filter matches) as tracked
operations: the operation, and the runs it was started on, each with what became of it."""

from __future__ import annotations

from django.db import models


class BulkOperation(models.Model):
    """One bulk action: who started it, why, on what filter; its progress, kept after it ends as
    the operation's own audit record (each run it changed also gets an AuditEntry naming it).
    A runner (or the command that started it) executes it in batches under a lease, so another
    runner takes over when that one dies."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        ABORTED = "aborted"

    action = models.CharField(max_length=32)
    filter = models.JSONField(
        default=dict, help_text="The run filter, as given (workflows.reads.run_filter)."
    )
    actor = models.CharField(max_length=200)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    expected_count = models.IntegerField(null=True, blank=True, help_text="The count the operator confirmed.")
    total = models.IntegerField(default=0, help_text="Runs the action applied to when it was started.")
    done = models.IntegerField(default=0)
    skipped = models.IntegerField(default=0, help_text="Runs the action no longer applied to when reached.")
    failed = models.IntegerField(default=0)
    abort_requested = models.BooleanField(default=False)
    aborted_by = models.CharField(max_length=200, blank=True)
    abort_reason = models.TextField(blank=True)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"], name="workflows_bulk_status")]

    def __str__(self) -> str:
        return f"bulk {self.action} #{self.id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.ABORTED)

    @property
    def processed(self) -> int:
        return self.done + self.skipped + self.failed


class BulkTarget(models.Model):
    """A run a bulk operation was started on (the filter's matches at its start, so runs created
    later are not swept in), and what became of it: done, skipped (why) or failed (why); empty
    while not reached. No foreign key: pruning a run leaves its line here."""

    class Outcome(models.TextChoices):
        WAITING = ""
        DONE = "done"
        SKIPPED = "skipped"
        FAILED = "failed"

    operation = models.ForeignKey(BulkOperation, on_delete=models.CASCADE, related_name="targets")
    run_id = models.UUIDField()
    outcome = models.CharField(max_length=8, choices=Outcome.choices, blank=True, default="")
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["operation", "id"]
        indexes = [models.Index(fields=["operation", "outcome", "id"], name="workflows_bulk_target_next")]

    def __str__(self) -> str:
        return f"{self.run_id} ({self.outcome or 'waiting'})"
