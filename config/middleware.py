"""Django's standard middlewares, run on the event loop under ASGI instead of a thread each.

Why: none of Django's middlewares is sync-only, yet each costs thread hops under ASGI.
`MiddlewareMixin.__acall__` runs every `process_request` and `process_response` through
`sync_to_async(thread_sensitive=True)`, and the handler adapts every sync `process_view` the
same way: profiled on `POST /jobs`, 14 of the request's 16 hops to the one sync thread came
from the seven middlewares (the other two: the request_started signal and closing the response,
which touch the thread's database connections and stay there; the sync view is the third). Each
hop is a context switch and a future, and they queue behind the views that hold that thread.

The classes below are the same middlewares (subclasses: same hooks, same order in MIDDLEWARE,
same behaviour) whose async path calls the hooks inline when they cannot block, and hops only
when they can: a session to save, messages to store, a CSRF check that reads a form body or a
session. Under WSGI and the test client (sync) nothing changes: Django calls the sync hooks.
No reordering was needed: every middleware of the chain is both sync- and async-capable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.contrib.messages.storage import default_storage
from django.contrib.sessions.middleware import SessionMiddleware as _Sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrameOptions
from django.middleware.common import CommonMiddleware as _Common
from django.middleware.csrf import CsrfViewMiddleware as _Csrf
from django.middleware.security import SecurityMiddleware as _Security
from django.utils.functional import SimpleLazyObject, empty

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class InlineHooks:
    """Mixin for a `MiddlewareMixin` subclass: its async path runs `process_request` and
    `process_response` inline, or in the sync thread when `request_blocks` / `response_blocks`
    say the hook may do I/O (the default: never)."""

    get_response: Callable[[HttpRequest], Any]

    def request_blocks(self, request: HttpRequest) -> bool:
        return False

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        hook = getattr(self, "process_request", None)
        if hook is not None:
            response = await _call(hook, self.request_blocks(request), request)
        response = response or await self.get_response(request)
        hook = getattr(self, "process_response", None)
        if hook is not None:
            response = await _call(hook, self.response_blocks(request, response), request, response)
        return response


async def _call(hook: Callable[..., Any], blocks: bool, *args: Any) -> Any:
    if blocks:
        return await sync_to_async(hook, thread_sensitive=True)(*args)
    return hook(*args)


class SecurityMiddleware(InlineHooks, _Security):
    """Headers and an HTTPS redirect: no I/O."""


class SessionMiddleware(InlineHooks, _Sessions):
    """Reading the cookie is lazy (the session loads when a view touches it, in the view's thread);
    only saving a modified session (or every one, SESSION_SAVE_EVERY_REQUEST) writes the store."""

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(InlineHooks, _Common):
    """Host and user-agent checks, the APPEND_SLASH redirect (URL resolution), Content-Length: no I/O."""


class CsrfViewMiddleware(InlineHooks, _Csrf):
    """The secret comes from a cookie (no I/O) unless CSRF_USE_SESSIONS (the session store). The
    check of an unsafe request reads its form body (maybe a file on disk): that one hops, while
    a safe method or a csrf_exempt view (Ninja's API views) is decided inline."""

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        if self.async_mode:  # the handler awaits a coroutine method as it is, adapts a sync one
            self.process_view = self._aprocess_view  # type: ignore[method-assign, assignment]

    def request_blocks(self, request: HttpRequest) -> bool:
        return bool(settings.CSRF_USE_SESSIONS)

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return bool(settings.CSRF_USE_SESSIONS)

    async def _aprocess_view(
        self, request: HttpRequest, callback: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponseBase | None:
        inline = not settings.CSRF_USE_SESSIONS and (
            request.method in SAFE_METHODS or getattr(callback, "csrf_exempt", False)
        )
        return await _call(_Csrf.process_view.__get__(self), not inline, request, callback, args, kwargs)


class AuthenticationMiddleware(InlineHooks, _Authentication):
    """Sets a lazy `request.user`: the session and the user load when something reads them."""


class MessageMiddleware(InlineHooks, _Messages):
    """The storage is made when something first touches `request._messages` (adding a message,
    a template listing them), not for every request: an API request never does, and making it
    (a cookie and a session storage) was the costliest hook of `POST /jobs`. Storing messages
    (used or added) may write the session: that hops."""

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not _made(getattr(request, "_messages", None)):
            return response
        return super().process_response(request, response)

    def response_blocks(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        return _made(storage) and bool(storage.used or storage.added_new)  # type: ignore[union-attr]


def _made(storage: Any) -> bool:
    """A message storage that exists: not None, and not a lazy one never touched."""
    if isinstance(storage, SimpleLazyObject):
        return storage._wrapped is not empty  # type: ignore[attr-defined]
    return storage is not None


class XFrameOptionsMiddleware(InlineHooks, _XFrameOptions):
    """One header: no I/O."""
