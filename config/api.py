"""The project's one NinjaAPI: routers of the apps, and domain errors mapped to HTTP once.

Every error answers with the same shape: {"error": {"code": str, "message": str, "detail": any}}.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from workflows.core.exceptions import (
    BadInput,
    MessageTimeout,
    RunFinished,
    RunNotFound,
    UnknownWorkflow,
    WorkflowError,
)

api = NinjaAPI(
    title="Durable workflows",
    version="1.0",
    description="Start and follow durable workflow runs; the example app's jobs.",
    docs_url="/api/docs",
    openapi_url="/api/openapi.json",
    urls_namespace="api",
)


def error_response(request: HttpRequest, status: int, code: str, message: str, detail=None) -> HttpResponse:
    return api.create_response(
        request, {"error": {"code": code, "message": message, "detail": detail}}, status=status
    )


@api.exception_handler(ValidationError)
def _validation(request, exc: ValidationError):
    return error_response(request, 422, "invalid_request", "the request is not valid", exc.errors)


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    # Ninja's own refusals (e.g. a body that is not JSON), in the one shape.
    return error_response(request, exc.status_code, "bad_request", str(exc))


@api.exception_handler(RequestDataTooBig)
def _too_large(request, exc):
    # Over DATA_UPLOAD_MAX_MEMORY_SIZE: Django refuses to read the body.
    return error_response(request, 413, "too_large", "the request body is too large")


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return error_response(
        request, 401, "unauthorized", "a valid API key is required (Authorization: Bearer …)"
    )


# Domain errors: (exception, HTTP status, code). Ninja picks the handler of the most specific
# class in an exception's MRO, so UnknownWorkflow (a BadInput) still answers 404.
DOMAIN_ERRORS = (
    (UnknownWorkflow, 404, "not_found"),
    (RunNotFound, 404, "not_found"),
    (RunFinished, 409, "run_finished"),
    (MessageTimeout, 504, "timeout"),
    (BadInput, 422, "invalid_request"),
    (WorkflowError, 400, "workflow_error"),
)


def _domain_handler(status: int, code: str):
    def handler(request, exc):
        return error_response(request, status, code, str(exc), getattr(exc, "detail", None))

    return handler


for _exception, _status, _code in DOMAIN_ERRORS:
    api.add_exception_handler(_exception, _domain_handler(_status, _code))


# Routers are added by the apps' api modules (see config/urls.py for the import order).
