"""The tables of operating the engine: runners' presence, API keys, limiters and schedules."""

from __future__ import annotations

from django.db import models


class RunnerPresence(models.Model):
    """A runner process while it lives: refreshed with its heartbeat, deleted when it stops
    gracefully. Tells operators which runners are up and what they serve, and lets a runner that
    restarts on the same host take over its dead predecessor's runs without waiting out the lease."""

    owner = models.CharField(max_length=100, primary_key=True, help_text="The lease owner id of its runs.")
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    machine = models.CharField(
        max_length=200, blank=True, help_text="Kernel boot id and PID namespace: where the pid is valid."
    )
    process_start = models.CharField(
        max_length=64, blank=True, help_text="The process's start time as the kernel counts it."
    )
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()
    lease_seconds = models.FloatField()
    concurrency = models.PositiveIntegerField()
    workflows = models.JSONField(default=dict, help_text="Workflow name -> the versions it knows.")
    clock_offset = models.FloatField(
        null=True,
        blank=True,
        help_text="Seconds its host's wall clock is ahead of the database's (last measured).",
    )

    class Meta:
        ordering = ["started_at", "owner"]

    def __str__(self) -> str:
        return self.owner


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


class Limiter(models.Model):
    """One row per named limiter, locked (by an update) while a runner decides an admission, so
    two runners never both take the last slot. Its figures live in code (`workflows.Limiter`)."""

    name = models.CharField(max_length=100, primary_key=True)
    touched_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class LimiterSlot(models.Model):
    """One admitted attempt under a limiter: counted against requests_per_minute from
    `acquired_at`, against concurrency until `released_at` (or `expires_at`, if its runner
    died), and against tokens_per_minute with the `tokens` it recorded. Rows older than the
    window are deleted as new ones are admitted."""

    limiter = models.CharField(max_length=100)
    holder = models.CharField(max_length=300, help_text="run id, scope, step and attempt")
    acquired_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["limiter", "acquired_at"], name="workflows_slot_limiter")]

    def __str__(self) -> str:
        return f"{self.limiter}: {self.holder}"


class Schedule(models.Model):
    """A cron schedule's state: what code declares (`workflows.schedule(...)`) is synced in by each
    starting runner; the next and last fire times and the paused flag are kept here, so they
    survive restarts. A schedule removed from code is marked `gone`, never deleted."""

    name = models.CharField(max_length=200, unique=True)
    workflow = models.CharField(max_length=200)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    catch_up = models.CharField(
        max_length=16, default="skip", help_text="skip, all, or a number of missed fires."
    )
    next_fire_at = models.DateTimeField(null=True, blank=True, help_text="The next fire not yet started.")
    last_fire_at = models.DateTimeField(null=True, blank=True)
    last_runs = models.JSONField(default=list, blank=True, help_text="The latest fires: fire_time, run_id.")
    paused = models.BooleanField(default=False)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.CharField(max_length=200, blank=True)
    pause_reason = models.TextField(blank=True)
    gone = models.BooleanField(default=False, help_text="No longer declared in code: kept, never fired.")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron} {self.timezone})"
