"""`POST /jobs` and `GET /jobs/{job_id}`: start an AI job and read it.

Errors become HTTP once, in config/api.py, in the one shape `{"error": {"code", "message",
"detail"}}`. The body is read here rather than by Ninja so that an oversized body is refused
(413) before it is parsed, and a body that is not a JSON object gets a clear error.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import ValidationError as PydanticValidationError

from inspector.access import run_stream_token
from workflows import BadInput
from workflows.http import ApiKeyAuth, ErrorOut, JsonTooDeep, check_priority, parse_json
from workflows.models import ApiKey

from .schemas import JobStart
from .submission import ajob_submit, job_detail

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
IDEMPOTENCY_KEY_MAX = 255  # characters


class JobsAuth(ApiKeyAuth):
    """Open, as in the seed, unless JOBS_REQUIRE_API_KEY=1: then the /api/ keys (Bearer). Async
    (Ninja awaits it), so an open /jobs costs no hop to a thread; a key is looked up in one."""

    is_async = True

    async def __call__(self, request: HttpRequest) -> Any:  # type: ignore[override]
        if not getattr(settings, "JOBS_REQUIRE_API_KEY", False):
            return "anonymous"
        return await sync_to_async(super().__call__)(request)


router = Router(auth=JobsAuth(), tags=["jobs"])


_STREAM_TOKEN = Field(
    description="Lets its holder follow the run's events at ws/runs/{runId}/?token=… (expires; "
    "GET /jobs/{id} gives a fresh one); null when the server takes no tokens (RUN_STREAM_AUTH)."
)


class JobCreatedOut(Schema):
    jobId: str = Field(description="The job's id (a UUID); also its run's key.")
    runId: str
    streamToken: str | None = _STREAM_TOKEN


class JobOut(Schema):
    jobId: str
    runId: str
    status: str = Field(
        description="The run's status: pending, running, waiting, completed, failed, cancelled."
    )
    stage: str | None = Field(
        description="Where the job is now: the latest progress event's stage, or the running step's."
    )
    detail: str | None = Field(
        description="What is happening now, e.g. 'extract failed (model returned 429), retrying in 4 s'."
    )
    nextAttemptAt: dt.datetime | None = Field(
        description="When a step waiting to retry tries again; null when none waits."
    )
    state: dict[str, Any] = Field(
        description="stage (queued, extracting, enriching, summarizing, publishing, published, failed), "
        "title, extracted, companies, summary, url, error."
    )
    streamToken: str | None = _STREAM_TOKEN


# Open unless JOBS_REQUIRE_API_KEY=1: the key is optional as far as the schema can tell ({}).
_OPTIONAL_KEY = {"security": [{}, {"JobsAuth": []}]}
_JOB_BODY = {
    **_OPTIONAL_KEY,
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": JobStart.model_json_schema()}},
    },
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX, "pattern": r"\S"},
            "description": "Repeat it to get the same job back; reused with another body: 422.",
        }
    ],
}
_ERRORS = {400: ErrorOut, 401: ErrorOut, 413: ErrorOut, 422: ErrorOut}


@router.post(
    "",
    response={202: JobCreatedOut, **_ERRORS},
    openapi_extra=_JOB_BODY,
    summary="Start a job",
    description="Answers 202 once the job's start message is stored; the runner does the rest.",
)
async def create_job(request: HttpRequest):
    data = _json_object(request)  # the body is in memory already (Django's ASGI handler read it)
    priority = _job_priority(data)
    job = _job_start(data)
    submitted = await ajob_submit(
        job.model_dump(), idempotency_key=_idempotency_key(request), owner=_owner(request), priority=priority
    )
    return Status(
        202,
        {
            "jobId": submitted.job_id,
            "runId": submitted.run_id,
            "streamToken": run_stream_token(submitted.run_id),
        },
    )


@router.get(
    "/{job_id}",
    response={200: JobOut, 401: ErrorOut, 404: ErrorOut},
    openapi_extra=_OPTIONAL_KEY,
    summary="Read a job",
)
async def get_job(request: HttpRequest, job_id: str):
    job = await sync_to_async(job_detail)(job_id, owner=_owner(request))
    return {**job, "streamToken": run_stream_token(job["runId"])}


def _owner(request: HttpRequest) -> ApiKey | None:
    """The API key that authenticated the request, when /jobs requires one: jobs and
    Idempotency-Keys are scoped to it. None on an open /jobs (one shared namespace)."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiKey) else None


# --- reading the request ----------------------------------------------------------------------------


def _json_object(request: HttpRequest) -> dict[str, Any]:
    limit = int(getattr(settings, "JOBS_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))
    declared = request.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"the body is over {limit} bytes")
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise HttpError(413, f"the body is over {limit} bytes")
    try:
        data = parse_json(raw)
    except JsonTooDeep as exc:
        raise HttpError(400, str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValidationError(
            [{"loc": ["body"], "msg": "the body must be a JSON object", "type": "dict_type"}]
        )
    return data


def _job_priority(data: dict[str, Any]) -> int:
    """The optional `priority` of the body (-100..100, default 0; higher jobs start first), taken
    out of it: the rest is the start message."""
    try:
        return check_priority(data.pop("priority", 0))
    except BadInput as exc:
        raise ValidationError([{"type": "priority", "loc": ["body", "priority"], "msg": str(exc)}]) from None


def _job_start(data: dict[str, Any]) -> JobStart:
    try:
        return JobStart.model_validate(data)
    except PydanticValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        raise ValidationError([{**e, "loc": ["body", *e["loc"]]} for e in errors]) from None


def _idempotency_key(request: HttpRequest) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not key.strip() or len(key) > IDEMPOTENCY_KEY_MAX:
        raise ValidationError(
            [
                {
                    "loc": ["header", "Idempotency-Key"],
                    "msg": f"must be 1 to {IDEMPOTENCY_KEY_MAX} characters",
                    "type": "string_length",
                }
            ]
        )
    return key
