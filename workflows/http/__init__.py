"""The HTTP front door: the generic API's router, and the helpers an app builds its own API with.

    from ninja import NinjaAPI
    from workflows.http import install_error_handlers, router

    api = install_error_handlers(NinjaAPI())
    api.add_router("/", router)  # the generic API of every registered workflow

An app's own routes reuse the same pieces: `ApiKeyAuth` (keys made in the admin or with
`manage.py workflows apikey`), `parse_json` for a body it reads itself, `ErrorOut` for the one
error shape in its OpenAPI schema, `JsonErrorsMiddleware` for what never reaches a handler, and
`metrics_view` for `GET /metrics`; `unstorable`, `check_priority` and `quoted` check
and name input as the engine will. The modules: `api` (the router), `runs` and `operators` (its
routes), `schemas`, `auth`, `parser`, `errors`, `metrics`.
"""

# isort: off
from . import runs  # noqa: F401  (adds the app routes to `router`, first, as the API lists them)
from . import operators  # noqa: F401  (adds the operators' repairs after them)
from . import bulk  # noqa: F401  (and the bulk actions after those)
from . import pauses  # noqa: F401  (and pause and resume last)

# isort: on
from ..core.concurrency import check_priority
from ..core.jsonvalue import unstorable
from ..core.keys import quoted
from .api import router
from .auth import ApiKeyAuth, actor, check_api_key, create_api_key, revoke_api_key
from .errors import (
    RETRY_AFTER_SECONDS,
    UNAVAILABLE,
    JsonErrorsMiddleware,
    error_response,
    install_error_handlers,
    json_error,
)
from .metrics import metrics_view
from .parser import MAX_BODY_DEPTH, JsonParser, JsonTooDeep, parse_json
from .schemas import ErrorOut

__all__ = [
    "MAX_BODY_DEPTH",
    "RETRY_AFTER_SECONDS",
    "UNAVAILABLE",
    "ApiKeyAuth",
    "ErrorOut",
    "JsonErrorsMiddleware",
    "JsonParser",
    "JsonTooDeep",
    "actor",
    "check_api_key",
    "check_priority",
    "create_api_key",
    "error_response",
    "install_error_handlers",
    "json_error",
    "metrics_view",
    "parse_json",
    "quoted",
    "revoke_api_key",
    "router",
    "unstorable",
]
