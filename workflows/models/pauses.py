"""Paused workflows: while a workflow has a row here, no runner claims any run of it."""

from __future__ import annotations

from django.db import models


class WorkflowPause(models.Model):
    """A workflow an operator paused (`operations.pause_workflow`): who, when, why. Its runs keep
    their status; claims skip them until the row is gone (`operations.resume_workflow`)."""

    workflow = models.CharField(max_length=200, primary_key=True)
    reason = models.TextField(blank=True)
    actor = models.CharField(max_length=200, help_text="User name, API key name or command.")
    paused_at = models.DateTimeField()

    class Meta:
        ordering = ["workflow"]

    def __str__(self) -> str:
        return f"{self.workflow} paused by {self.actor}"
