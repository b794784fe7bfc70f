"""The engine's errors as HTTP, in one JSON shape, for any NinjaAPI that mounts `workflows.api.router`.

    from ninja import NinjaAPI
    from workflows.api import router
    from workflows.api_errors import install_error_handlers

    api = install_error_handlers(NinjaAPI())
    api.add_router("/", router)

Every error then answers `{"error": {"code": str, "message": str, "detail": any}}`: the domain
errors of `workflows.core.exceptions` (table `DOMAIN_ERRORS`), and Ninja's and Django's own
refusals (an invalid request, a body that is not JSON or too large, a missing API key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from .core.exceptions import (
    BadInput,
    MessageTimeout,
    RunFinished,
    RunNotFound,
    UnknownWorkflow,
    WorkflowError,
)

# Domain errors: (exception, HTTP status, code). Ninja picks the handler of the most specific
# class in an exception's MRO, so UnknownWorkflow (a BadInput) still answers 404.
DOMAIN_ERRORS: tuple[tuple[type[WorkflowError], int, str], ...] = (
    (UnknownWorkflow, 404, "not_found"),
    (RunNotFound, 404, "not_found"),
    (RunFinished, 409, "run_finished"),
    (MessageTimeout, 504, "timeout"),
    (BadInput, 422, "invalid_request"),
    (WorkflowError, 400, "workflow_error"),
)

Handler = Callable[[HttpRequest, Any], HttpResponse]


def error_response(
    api: NinjaAPI, request: HttpRequest, status: int, code: str, message: str, detail: Any = None
) -> HttpResponse:
    """An error in the one shape, rendered by `api` (for an app's own handlers or views)."""
    return api.create_response(
        request, {"error": {"code": code, "message": message, "detail": detail}}, status=status
    )


def install_error_handlers(api: NinjaAPI) -> NinjaAPI:
    """Map the engine's domain errors and Ninja's refusals to HTTP on `api`; returns `api`."""

    def handler(
        status: int | None, code: str, message: str | None = None, *, detail: bool = False
    ) -> Handler:
        def handle(request: HttpRequest, exc: Any) -> HttpResponse:
            return error_response(
                api,
                request,
                exc.status_code if status is None else status,
                code,
                str(exc) if message is None else message,
                getattr(exc, "detail", None) if detail else None,
            )

        return handle

    def invalid(request: HttpRequest, exc: Any) -> HttpResponse:  # a ninja ValidationError
        return error_response(api, request, 422, "invalid_request", "the request is not valid", exc.errors)

    api.add_exception_handler(ValidationError, invalid)
    # Ninja's own refusals (e.g. a body that is not JSON), in the one shape.
    api.add_exception_handler(HttpError, handler(None, "bad_request"))
    # Over DATA_UPLOAD_MAX_MEMORY_SIZE: Django refuses to read the body.
    api.add_exception_handler(RequestDataTooBig, handler(413, "too_large", "the request body is too large"))
    api.add_exception_handler(
        AuthenticationError,
        handler(401, "unauthorized", "a valid API key is required (Authorization: Bearer …)"),
    )
    for exception, status, code in DOMAIN_ERRORS:
        api.add_exception_handler(exception, handler(status, code, detail=True))
    return api
