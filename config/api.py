"""The project's one NinjaAPI: routers of the apps, and domain errors mapped to HTTP once.

Every error answers with the same shape: {"error": {"code": str, "message": str, "detail": any}}.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from workflows.exceptions import (
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


@api.exception_handler(UnknownWorkflow)
def _unknown_workflow(request, exc):
    return error_response(request, 404, "not_found", str(exc))


@api.exception_handler(RunNotFound)
def _not_found(request, exc):
    return error_response(request, 404, "not_found", str(exc))


@api.exception_handler(RunFinished)
def _finished(request, exc):
    return error_response(request, 409, "run_finished", str(exc))


@api.exception_handler(MessageTimeout)
def _timeout(request, exc):
    return error_response(request, 504, "timeout", str(exc))


@api.exception_handler(BadInput)
def _bad_input(request, exc):
    return error_response(request, 422, "invalid_request", str(exc), getattr(exc, "detail", None))


@api.exception_handler(WorkflowError)
def _workflow_error(request, exc):
    return error_response(request, 400, "workflow_error", str(exc))


# Routers are added by the apps' api modules (see config/urls.py for the import order).
