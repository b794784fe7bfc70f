"""The engine's errors as HTTP, in one JSON shape, for any NinjaAPI that mounts `workflows.http.router`.

    from ninja import NinjaAPI
    from workflows.http import install_error_handlers, router

    api = install_error_handlers(NinjaAPI())
    api.add_router("/", router)

Every error then answers `{"error": {"code": str, "message": str, "detail": any}}`: the domain
errors of `workflows.core.exceptions` (table `DOMAIN_ERRORS`), and Ninja's and Django's own
refusals (an invalid request, a body that is not JSON or too large, a missing API key).

`JsonErrorsMiddleware` (add it to MIDDLEWARE) answers what never reaches a Ninja handler in the
same shape, under the JSON prefixes (`WORKFLOWS["JSON_ERROR_PREFIXES"]`, default `/api/` and
`/jobs`): an unknown URL (404 `not_found`), a method the route does not take (405
`method_not_allowed`, with its `Allow` header), an unhandled exception (500 `internal_error`,
logged with its traceback, never shown), and any other non-JSON error page Django would send.

A database that cannot be reached, or a connection pool with no connection to lend in time
(`UNAVAILABLE`), answers `503 {"error": {"code": "unavailable", ...}}` with a `Retry-After`
header, never Django's HTML 500 page: the call stored nothing (every write is one transaction),
so the client may repeat it as it was (with the same Idempotency-Key).
"""

from __future__ import annotations

import http
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from ..core.exceptions import (
    BadInput,
    EntryNotFound,
    KeyTaken,
    MessageTimeout,
    NotApplicable,
    NothingMatches,
    OperationNotFound,
    RunFinished,
    RunNotFound,
    StoreUnavailable,
    UnknownWorkflow,
    ValueTooLarge,
    WorkflowError,
)
from .parser import JsonParser, JsonTooDeep

logger = logging.getLogger(__name__)

# Domain errors: (exception, HTTP status, code). Ninja picks the handler of the most specific
# class in an exception's MRO, so UnknownWorkflow (a BadInput) still answers 404.
DOMAIN_ERRORS: tuple[tuple[type[WorkflowError], int, str], ...] = (
    (UnknownWorkflow, 404, "not_found"),
    (RunNotFound, 404, "not_found"),
    (EntryNotFound, 404, "not_found"),  # a fork from an entry the run never had
    # A fork given a key another run of the workflow holds: detail {"workflow", "key", "runId"}.
    (KeyTaken, 409, "key_taken"),
    (RunFinished, 409, "run_finished"),
    # A repair that does not apply to the run in its status (workflows.core.repair_rules); the
    # message is the sentence that says why, detail {"action", "runId", "status"}.
    (NotApplicable, 409, "not_applicable"),
    # A bulk action whose filter matches no run it applies to: no operation was created.
    (NothingMatches, 409, "nothing_matches"),
    (OperationNotFound, 404, "not_found"),
    (MessageTimeout, 504, "timeout"),
    (ValueTooLarge, 413, "too_large"),  # over WORKFLOWS["MAX_VALUE_BYTES"]: detail {"size", "limit"}
    (BadInput, 422, "invalid_request"),
    (WorkflowError, 400, "workflow_error"),
)


def _unavailable_errors() -> tuple[type[Exception], ...]:
    """Django's wrappers of the driver's connection errors (a pool's timeout is one: it raises
    psycopg_pool.PoolTimeout, a psycopg.OperationalError, inside Django's wrapper), the store's
    own StoreUnavailable, and psycopg's errors for code that talks to psycopg directly."""
    errors: list[type[Exception]] = [OperationalError, InterfaceError, StoreUnavailable]
    try:
        import psycopg
    except ImportError:  # SQLite only
        pass
    else:
        errors += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(errors)


# Infrastructure errors: the database is down, restarting or overloaded. Nothing of the call was
# kept, so the same call can succeed later: 503, and `Retry-After` seconds to wait first.
UNAVAILABLE: tuple[type[Exception], ...] = _unavailable_errors()
RETRY_AFTER_SECONDS = 2
UNAVAILABLE_MESSAGE = "the service cannot reach its database right now; try again shortly"

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

    def bad_request(request: HttpRequest, exc: Any) -> HttpResponse:
        # Ninja wraps its parser's error as "Cannot parse request body": too deep a body says so.
        message = str(exc.__cause__) if isinstance(exc.__cause__, JsonTooDeep) else str(exc)
        return error_response(api, request, exc.status_code, "bad_request", message)

    api.add_exception_handler(ValidationError, invalid)
    # Ninja's own refusals (e.g. a body that is not JSON or too deep), in the one shape.
    if type(api.parser) is Parser:  # Ninja's default: give it the depth limit
        api.parser = JsonParser()
    api.add_exception_handler(HttpError, bad_request)
    # Over DATA_UPLOAD_MAX_MEMORY_SIZE: Django refuses to read the body.
    api.add_exception_handler(RequestDataTooBig, handler(413, "too_large", "the request body is too large"))
    api.add_exception_handler(
        AuthenticationError,
        handler(401, "unauthorized", "a valid API key is required (Authorization: Bearer …)"),
    )
    for exception, status, code in DOMAIN_ERRORS:
        api.add_exception_handler(exception, handler(status, code, detail=True))

    def unavailable(request: HttpRequest, exc: Any) -> HttpResponse:
        # The cause goes to the log, not to the client: it may name hosts and users.
        logger.warning("%s %s answered 503: %s: %s", request.method, request.path, type(exc).__name__, exc)
        response = error_response(api, request, 503, "unavailable", UNAVAILABLE_MESSAGE)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    for infrastructure_error in UNAVAILABLE:
        api.add_exception_handler(infrastructure_error, unavailable)
    return api


# --- what never reaches a Ninja handler ----------------------------------------------------------

STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 500: "internal_error", 413: "too_large"}


def json_error_prefixes() -> tuple[str, ...]:
    from .. import conf  # the settings, read per request (tests override them)

    return tuple(conf.get("JSON_ERROR_PREFIXES") or ())


def _is_json_path(path: str) -> bool:
    for prefix in json_error_prefixes():
        bare = prefix.rstrip("/")
        if path == bare or path.startswith(bare + "/"):
            return True
    return False


def json_error(status: int, code: str, message: str, detail: Any = None) -> HttpResponse:
    """An error in the one shape, without a NinjaAPI at hand; its reason phrase is the standard one."""
    body = json.dumps({"error": {"code": code, "message": message, "detail": detail}})
    response = HttpResponse(body, status=status, content_type="application/json; charset=utf-8")
    response.reason_phrase = _reason(status)
    return response


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown Status Code"


def _is_json(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").split(";")[0].strip().lower() == "application/json"


def _as_json(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A non-JSON error response under a JSON prefix, in the one shape (headers such as `Allow`
    and `Retry-After` kept); a JSON one gets the standard reason phrase."""
    status = response.status_code
    if status < 400 or not _is_json_path(request.path):
        return response
    if _is_json(response):
        response.reason_phrase = _reason(status)
        return response
    if status == 404:
        message = f"no such URL: {request.method} {request.path}"
    elif status == 405:
        allowed = response.get("Allow", "")
        message = f"{request.method} is not allowed on {request.path}" + (
            f"; allowed: {allowed}" if allowed else ""
        )
    elif status >= 500:
        message = "the server failed to answer this request; it has been logged"
    else:
        message = _reason(status)
    code = STATUS_CODES.get(status) or ("server_error" if status >= 500 else "bad_request")
    answer = json_error(status, code, message)
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            answer[header] = response[header]
    return answer


def _crashed(request: HttpRequest, exc: Exception) -> HttpResponse | None:
    if not _is_json_path(request.path):
        return None  # Django's own handling (its 500 page, its log line)
    logger.error("Internal Server Error: %s", request.path, exc_info=exc)
    return json_error(500, "internal_error", "the server failed to answer this request; it has been logged")


class JsonErrorsMiddleware:
    """Every error under the JSON prefixes is JSON of the one shape (see the module docstring).
    Sync and async: under daphne the web tier is async and this adds no thread hop."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return _as_json(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        return _as_json(request, await get_response(request))

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return _crashed(request, exc)
