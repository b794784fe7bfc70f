"""Who may see what: one rule for every read of runs, and the run streams' tokens.

Reading runs (the admin's run inspector, `/dashboard/` and its pages, the `ws/runs/` list stream,
and a run's stream followed with a session) needs an active staff user with `workflows.view_run`
(or `workflows.change_run`, which Django's admin counts as view): `can_view_runs`. Views, the
admin and the consumers all ask it, so a user the admin refuses is refused everywhere.

A run's stream (`ws/runs/<run_id>/`) is guarded by `WORKFLOWS["RUN_STREAM_AUTH"]`:

- `"token"` (the default): a session that may view runs, or `?token=` a signed token bound to
  that run id (`run_stream_token`, `django.core.signing` with SECRET_KEY) not older than
  `WORKFLOWS["RUN_STREAM_TOKEN_SECONDS"]` when the client connects. The example app's
  `POST /jobs` and `GET /jobs/{id}` hand one out (`streamToken`) to whoever may read the job.
- `"session"`: a session that may view runs, nothing else.
- `"open"`: anyone who knows the run id (an unguessable uuid), as before this setting existed.

Whatever the mode, event payloads are masked (workflows.masking) before they leave.

A session is trusted only when the browser's Origin (if any) matches the Host, so another site
cannot borrow it; `config/asgi.py` also refuses Origins outside ALLOWED_HOSTS outright.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.security.websocket import AllowedHostsOriginValidator
from django.contrib.admin.views.decorators import staff_member_required
from django.core import signing
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest, HttpResponse

from workflows import conf

VIEW_PERMISSIONS = ("workflows.view_run", "workflows.change_run")
# What the 403 page says to staff who may not read runs.
VIEW_REFUSAL = (
    "Reading runs (the run inspector and the operator dashboard) needs an active staff account with "
    "the permission “workflows | run | Can view run” (workflows.view_run)."
)
STREAM_MODES = ("token", "session", "open")
TOKEN_SALT = "inspector.run-stream"  # tokens of this kind only: no other signed value passes


# --- reading runs -------------------------------------------------------------------------------


def can_view_runs(user: Any) -> bool:
    """Whether `user` may read runs: active staff with `workflows.view_run` (or change_run).
    Queries the permissions (once per user object): call it from sync code."""
    if user is None or not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    return any(user.has_perm(p) for p in VIEW_PERMISSIONS)


def view_runs_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """For the dashboard's views: anonymous and non-staff users go to the admin login (as
    `staff_member_required` does); staff without the permission get 403."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_view_runs(request.user):
            raise PermissionDenied(VIEW_REFUSAL)
        return view(request, *args, **kwargs)

    return staff_member_required(checked)


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


class OriginCheck:
    """Channels' `AllowedHostsOriginValidator`, but a WebSocket that sends no Origin and carries a
    run stream token (`?token=`) goes on to the consumer, which checks the token. Browsers always
    send an Origin, so they are still checked; a Python client, a backend service or a CLI sends
    none. Without a token, no Origin is still refused at the handshake."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.checked = AllowedHostsOriginValidator(app)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> Any:
        if _header(scope, b"origin") is None and _carries_token(scope):
            return await self.app(scope, receive, send)
        return await self.checked(scope, receive, send)


def _carries_token(scope: dict) -> bool:
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    return any(query.get("token", []))


def same_origin(scope: dict) -> bool:
    """A browser's cookies count only on a connection its own page opened: no Origin (not a
    browser), or an Origin naming the Host it connects to."""
    origin = _header(scope, b"origin")
    if origin is None:
        return True
    return urlparse(origin).netloc.lower() == (_header(scope, b"host") or "").lower()


def scope_can_view_runs(scope: dict) -> bool:
    """`can_view_runs` for a WebSocket's session user, from the same site only. Sync: it may
    query the permissions (wrap it in database_sync_to_async)."""
    return same_origin(scope) and can_view_runs(scope.get("user"))


# --- a run's stream -----------------------------------------------------------------------------


def run_stream_auth() -> str:
    """WORKFLOWS["RUN_STREAM_AUTH"]: "token" (default), "session" or "open"."""
    mode = conf.get("RUN_STREAM_AUTH")
    if mode not in STREAM_MODES:  # workflows.E009 says so at check time; never fall back to open
        raise ImproperlyConfigured(
            f'WORKFLOWS["RUN_STREAM_AUTH"] must be one of {STREAM_MODES}, not {mode!r}'
        )
    return mode


def run_stream_token_seconds() -> float:
    return float(conf.get("RUN_STREAM_TOKEN_SECONDS"))


def run_stream_token(run_id: str) -> str | None:
    """A token that lets its holder follow this run's stream (for a while), or None when the
    stream takes no tokens (RUN_STREAM_AUTH is "session" or "open")."""
    if run_stream_auth() != "token":
        return None
    signed = signing.TimestampSigner(salt=TOKEN_SALT).sign(str(run_id))
    return signed[len(str(run_id)) + 1 :]  # "<timestamp>:<signature>": the run id is the URL's


def check_run_stream_token(run_id: str, token: str | None) -> bool:
    """Whether `token` was made for this run id by this site and is not too old."""
    if not token:
        return False
    try:
        signing.TimestampSigner(salt=TOKEN_SALT).unsign(
            f"{run_id}:{token}", max_age=run_stream_token_seconds()
        )
    except signing.BadSignature:  # SignatureExpired included
        return False
    return True


def may_follow_run(scope: dict, run_id: str | None, token: str | None) -> bool:
    """Whether this WebSocket may follow the run (see the module docstring). `run_id` is the
    canonical uuid text, or None when the URL's is no uuid. Sync (it may query permissions)."""
    mode = run_stream_auth()
    if mode == "open":
        return True
    if scope_can_view_runs(scope):
        return True
    return mode == "token" and run_id is not None and check_run_stream_token(run_id, token)
