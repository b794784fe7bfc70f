"""`POST /jobs` and `GET /jobs/{job_id}`: start an AI job and read it (DESIGN.md §5).

Errors become HTTP once, in config/api.py, in the one shape `{"error": {"code", "message",
"detail"}}`. The body is read here rather than by Ninja so that an oversized body is refused
(413) before it is parsed, and a body that is not a JSON object gets a clear error.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import ValidationError as PydanticValidationError

from workflows.api import ErrorOut
from workflows.api_auth import ApiKeyAuth

from .schemas import JobStart
from .submission import job_detail, job_submit

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
IDEMPOTENCY_KEY_MAX = 255  # characters


class JobsAuth(ApiKeyAuth):
    """Open, as in the seed, unless JOBS_REQUIRE_API_KEY=1: then the /api/ keys (Bearer)."""

    def __call__(self, request: HttpRequest) -> Any:
        if not getattr(settings, "JOBS_REQUIRE_API_KEY", False):
            return "anonymous"
        return super().__call__(request)


router = Router(auth=JobsAuth(), tags=["jobs"])


class JobCreatedOut(Schema):
    jobId: str = Field(description="The job's id (a UUID); also its run's key.")


class JobOut(Schema):
    jobId: str
    runId: str
    status: str = Field(
        description="The run's status: pending, running, waiting, completed, failed, cancelled."
    )
    state: dict[str, Any] = Field(
        description="stage (queued, extracting, enriching, summarizing, publishing, published, failed), "
        "title, extracted, companies, summary, url, error."
    )


_JOB_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": JobStart.model_json_schema()}},
    },
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "maxLength": IDEMPOTENCY_KEY_MAX},
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
def create_job(request: HttpRequest):
    job = _job_start(_json_object(request))
    submitted = job_submit(job.model_dump(), idempotency_key=_idempotency_key(request))
    return Status(202, {"jobId": submitted.job_id})


@router.get("/{job_id}", response={200: JobOut, 401: ErrorOut, 404: ErrorOut}, summary="Read a job")
def get_job(request: HttpRequest, job_id: str):
    return job_detail(job_id)


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
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise HttpError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValidationError(
            [{"loc": ["body"], "msg": "the body must be a JSON object", "type": "dict_type"}]
        )
    return data


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
