"""The example app's one table: Idempotency-Key headers of `POST /jobs`, with what they started."""

from __future__ import annotations

from django.db import models


class IdempotencyKey(models.Model):
    """A client's Idempotency-Key: the same key returns the same job; with another body, 422."""

    key = models.CharField(max_length=255, unique=True)
    body_hash = models.CharField(max_length=64, help_text="sha256 of the request body, canonical JSON.")
    job_id = models.UUIDField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "idempotency key"

    def __str__(self) -> str:
        return f"{self.key} -> job {self.job_id}"
