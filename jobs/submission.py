"""Starting AI jobs and reading them: the services the API and the `jobs` command share."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from workflows import BadInput, RunNotFound, RunRecord, WorkflowClient
from workflows.http import quoted
from workflows.models import ApiKey

from .models import IdempotencyKey, JobOwner
from .now import jobs_now

WORKFLOW = "aiJob"


class IdempotencyConflict(BadInput):
    """An Idempotency-Key used again with a different body."""


@dataclass(frozen=True)
class Submitted:
    job_id: str
    created: bool  # False: an Idempotency-Key seen before, answered with its job
    run_id: str


def jobs_client() -> WorkflowClient:
    from .workflows import registry

    return registry.client(WORKFLOW)


def body_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def job_submit(
    body: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    owner: ApiKey | None = None,
    priority: int = 0,
) -> Submitted:
    """Start a job: its run, its start message and its owner (the API key `owner`, if any) are
    stored in one transaction, so a failure leaves nothing. With `idempotency_key` (unique per
    owner), a repeat returns the first job; another body (or priority), 422. `priority`
    (-100..100): higher jobs start first when runners are busy."""
    job_id = str(uuid.uuid4())
    if idempotency_key is None and owner is None:  # the run and its start message: one statement
        return _start_job(job_id, body, priority)
    with transaction.atomic():
        if idempotency_key is not None:
            digest = body_hash({**body, "priority": priority} if priority else body)
            if not _claim_key(idempotency_key, owner, digest, job_id):  # a twin's insert won
                known = IdempotencyKey.objects.get(key=idempotency_key, api_key=owner)
                try:
                    run_id = jobs_client().get([str(known.job_id)]).run_id
                except RunNotFound:
                    # Its job's run was pruned (WORKFLOWS["RETENTION"]): the key expired with it
                    # and starts a new job, whatever the body.
                    known.job_id, known.body_hash = job_id, digest
                    known.save(update_fields=["job_id", "body_hash"])
                else:
                    if known.body_hash != digest:
                        raise IdempotencyConflict(
                            "this Idempotency-Key was used with a different request body"
                        ) from None
                    return Submitted(job_id=str(known.job_id), created=False, run_id=run_id)
        if owner is not None:
            JobOwner.objects.create(job_id=job_id, api_key=owner)
        return _start_job(job_id, body, priority)


async def ajob_submit(
    body: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    owner: ApiKey | None = None,
    priority: int = 0,
) -> Submitted:
    """`job_submit` for an async view: the Idempotency-Key's row, the owner's, the run and its
    start message written in one transaction by `aget_or_create(together=...)`: on PostgreSQL one
    round trip from the event loop (WORKFLOWS["ASYNC_CONNECTIONS"]), no thread. A key already
    there refuses that insert, so nothing is written, and the request takes `job_submit`'s way,
    which answers with the key's job (or 422 for another body)."""
    job_id = str(uuid.uuid4())
    together = []
    if idempotency_key is not None:
        digest = body_hash({**body, "priority": priority} if priority else body)
        together.append(
            (_insert_sql(IdempotencyKey, KEY_FIELDS), _key_values(idempotency_key, owner, digest, job_id))
        )
    if owner is not None:
        together.append(
            (_insert_sql(JobOwner, OWNER_FIELDS), _db_values(JobOwner, OWNER_FIELDS, job_id, owner.pk))
        )
    try:
        handle = await jobs_client().aget_or_create(
            [job_id], priority=priority, message=("start", body), state={"title": body.get("title")},
            together=together,
        )  # fmt: skip
    except IntegrityError:
        if idempotency_key is None:
            raise
        submit = sync_to_async(job_submit)  # the key is known (or was just taken by a twin)
        return await submit(body, idempotency_key=idempotency_key, owner=owner, priority=priority)
    return Submitted(job_id=job_id, created=True, run_id=handle.run_id)


KEY_FIELDS = ("key", "api_key", "body_hash", "job_id", "created_at")
OWNER_FIELDS = ("job_id", "api_key", "created_at")


@cache
def _insert_sql(model: type[models.Model], fields: tuple[str, ...], suffix: str = "") -> str:
    """A row's insert, built once: the table and columns as the model names them."""
    meta = model._meta
    column = {field.name: str(field.column) for field in meta.concrete_fields}
    columns = ", ".join(connection.ops.quote_name(column[name]) for name in fields)
    marks = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({columns}) VALUES ({marks}){suffix}"


def _db_values(model: type[models.Model], fields: tuple[str, ...], *given: Any) -> list[Any]:
    """The values as the database takes them (a UUID on SQLite is hex text; psycopg takes a UUID
    and an aware datetime as they are): `given`, then `created_at` (the last field) now."""
    values = [*given, timezone.now()]
    if _native_values():
        return values
    return [
        model._meta.get_field(name).get_db_prep_value(value, connection, prepared=False)
        if name in ("job_id", "created_at") else value
        for name, value in zip(fields, values, strict=True)
    ]  # fmt: skip


@cache
def _native_values() -> bool:
    return connection.vendor == "postgresql"


def _key_values(key: str, owner: ApiKey | None, digest: str, job_id: str) -> list[Any]:
    return _db_values(IdempotencyKey, KEY_FIELDS, key, owner.pk if owner else None, digest, uuid.UUID(job_id))


def _claim_key(key: str, owner: ApiKey | None, digest: str, job_id: str) -> bool:
    """Record the Idempotency-Key for `job_id` in ONE statement: True if this request's insert
    won, False if the key was already there (its row is then read). `ON CONFLICT DO NOTHING`
    (no target: either partial unique constraint) rather than an insert in a savepoint that a
    duplicate rolls back: no savepoint round trips and no error for a repeat. PostgreSQL and
    SQLite (3.35+) both take this statement."""
    sql = _insert_sql(IdempotencyKey, KEY_FIELDS, " ON CONFLICT DO NOTHING RETURNING 1")
    with connection.cursor() as cursor:
        cursor.execute(sql, _key_values(key, owner, digest, job_id))
        return cursor.fetchone() is not None


def _start_job(job_id: str, body: dict[str, Any], priority: int) -> Submitted:
    """The job's run with its start message and its title, stored together (a new key: always
    created)."""
    # The title in the state from the start: the lists name the job before its first step succeeds.
    handle = jobs_client().get_or_create(
        [job_id], priority=priority, message=("start", body), state={"title": body.get("title")}
    )
    return Submitted(job_id=job_id, created=True, run_id=handle.run_id)


def job_detail(job_id: str, *, owner: ApiKey | None = None) -> dict[str, Any]:
    """The job as the API shows it; RunNotFound for an unknown id. With `owner` (an API key),
    a job that key did not start is unknown too: a tenant cannot tell another's jobs exist."""
    unknown = RunNotFound(f"no job {quoted(job_id)}")
    if owner is not None and not _owned_by(job_id, owner):
        raise unknown  # as for an unknown job
    try:
        handle = jobs_client().get([job_id])
    except RunNotFound:
        raise unknown from None
    return job_view(job_id, handle.snapshot)


def _owned_by(job_id: str, owner: ApiKey) -> bool:
    try:
        parsed = uuid.UUID(str(job_id))
    except ValueError:
        return False
    return JobOwner.objects.filter(job_id=parsed, api_key=owner).exists()


def job_view(job_id: str, run: RunRecord) -> dict[str, Any]:
    return {"jobId": job_id, "runId": run.id, "status": run.status, **job_now(run), "state": run.state}


def job_now(run: RunRecord) -> dict[str, Any]:
    """What is happening to the job now (`jobs.now`, the one reading the inspector's labels share):
    `stage`, `detail`, and `nextAttemptAt` when a step waits to retry."""
    now = jobs_now([run])[str(run.id)]
    return {"stage": now.stage, "detail": now.detail, "nextAttemptAt": now.next_attempt_at}
