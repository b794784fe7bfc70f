"""Starting AI jobs and reading them: the services the API and the `jobs` command share."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from workflows import BadInput
from workflows.core.records import RunRecord
from workflows.engine.client import WorkflowClient

from .models import IdempotencyKey

WORKFLOW = "aiJob"


class IdempotencyConflict(BadInput):
    """An Idempotency-Key used again with a different body."""


@dataclass(frozen=True)
class Submitted:
    job_id: str
    created: bool  # False: an Idempotency-Key seen before, answered with its job


def jobs_client() -> WorkflowClient:
    from .workflows import registry

    return registry.client(WORKFLOW)


def body_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def job_submit(body: dict[str, Any], *, idempotency_key: str | None = None) -> Submitted:
    """Start a job: its run and its start message are stored in one transaction, so a failure
    leaves nothing. With `idempotency_key`, a repeat returns the first job; another body, 422."""
    job_id = str(uuid.uuid4())
    with transaction.atomic():
        if idempotency_key is not None:
            digest = body_hash(body)
            try:
                with transaction.atomic():  # a savepoint: a concurrent twin's insert wins
                    IdempotencyKey.objects.create(key=idempotency_key, body_hash=digest, job_id=job_id)
            except IntegrityError:
                known = IdempotencyKey.objects.get(key=idempotency_key)
                if known.body_hash != digest:
                    raise IdempotencyConflict(
                        "this Idempotency-Key was used with a different request body"
                    ) from None
                return Submitted(job_id=str(known.job_id), created=False)
        handle = jobs_client().get_or_create([job_id])
        handle.send("start", body)
    return Submitted(job_id=job_id, created=True)


def job_detail(job_id: str) -> dict[str, Any]:
    """The job as the API shows it; RunNotFound for an unknown id."""
    return job_view(job_id, jobs_client().get([job_id]).snapshot)


def job_view(job_id: str, run: RunRecord) -> dict[str, Any]:
    return {"jobId": job_id, "runId": run.id, "status": run.status, "state": run.state}
