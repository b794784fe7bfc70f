"""The example app's tables: Idempotency-Key headers of `POST /jobs`, with what they started, and
which API key started a job (when `/jobs` requires API keys)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workflows.models import ApiKey


class IdempotencyKey(models.Model):
    """A client's Idempotency-Key: the same key returns the same job; with another body, 422.
    Keys are unique per API key (tenants never see or claim each other's); those sent without
    one (an open `/jobs`) share one namespace."""

    key = models.CharField(max_length=255)
    api_key = models.ForeignKey(
        ApiKey,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        help_text="Who sent it; none on an open /jobs.",
    )
    body_hash = models.CharField(max_length=64, help_text="sha256 of the request body, canonical JSON.")
    job_id = models.UUIDField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "idempotency key"
        constraints = [
            # Two partial constraints: a NULL api_key would never clash in one (NULLs are distinct).
            models.UniqueConstraint(
                fields=["api_key", "key"],
                condition=Q(api_key__isnull=False),
                name="jobs_idempotency_per_api_key",
            ),
            models.UniqueConstraint(
                fields=["key"], condition=Q(api_key__isnull=True), name="jobs_idempotency_open"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} -> job {self.job_id}"


class JobOwner(models.Model):
    """The API key that started a job, written in the start's transaction. Only jobs started
    with a key have one: with JOBS_REQUIRE_API_KEY=1, `GET /jobs/{id}` shows a job to the key
    that started it and to no one else (404), so a job without an owner is hidden from every key."""

    job_id = models.UUIDField(unique=True)
    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "job owner"

    def __str__(self) -> str:
        return f"job {self.job_id} of API key {self.api_key_id}"


class PublishedBrief(models.Model):
    """A brief the example job published, written by its `record-publication` transaction step
    (`ctx.transaction`): in the transaction that records the step, so a job has this row exactly
    when its history says the publication was recorded, whatever crashes between."""

    job_id = models.CharField(max_length=255, db_index=True, help_text="The run's key (a job id).")
    run_id = models.CharField(max_length=64)
    url = models.CharField(max_length=2048)
    title = models.CharField(max_length=500)
    published_at = models.DateTimeField()
    # The step's idempotency key: one row per recorded step (an operator's replay of the step
    # records another, under a new key).
    step_key = models.CharField(max_length=255, unique=True)

    class Meta:
        verbose_name = "published brief"

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.url}"
