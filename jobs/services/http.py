"""The one HTTP seam of the example app: the service clients, and HTTP failures sorted into
retryable errors and `CriticalError`s."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import email.utils
import functools
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

from workflows import CriticalError, RetryAfter

DEFAULT_TIMEOUT = 30.0  # seconds: CRM and CMS calls; model calls pass their own
ERROR_TEXT_LIMIT = 500  # characters of a response body quoted in an error

# Connections a service's shared client keeps: a runner runs at most `--concurrency` steps at
# once, so more would only wait; fewer kept alive than allowed, as idle ones cost the server.
POOL_LIMITS = httpx2.Limits(max_connections=20, max_keepalive_connections=10, keepalive_expiry=30.0)

_transport: httpx2.AsyncBaseTransport | None = None
# The runner's shared clients, by service, while `service_clients()` is entered (see there).
_shared: contextvars.ContextVar[dict[str, httpx2.AsyncClient] | None] = contextvars.ContextVar(
    "jobs_service_clients", default=None
)


class ServiceUnavailable(Exception):
    """The service failed in a way worth retrying (429, 5xx, network error, timeout)."""


class InvalidReply(Exception):
    """The service answered 2xx with something we cannot use (e.g. not JSON): retried."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~40 ms of CPU: once per process, not once per step.
    return httpx2.create_ssl_context()


def client(**kwargs: Any) -> httpx2.AsyncClient:
    """A new client (HTTP/2 where the server speaks it). Tests route it through `use_transport`."""
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    kwargs.setdefault("verify", _ssl_context())
    kwargs.setdefault("http2", True)
    return httpx2.AsyncClient(transport=_transport, **kwargs)


@contextlib.asynccontextmanager
async def service_clients() -> AsyncIterator[None]:
    """A runner's lifespan (`WORKFLOWS["RUNNER_LIFESPAN"]`): while it is entered, each service
    gets one client for the runner's life (`client_for`), so a step reuses the connection (and
    the TLS session) an earlier step opened, instead of paying a new one per step; the clients
    close when the runner stops. Steps see them through a context variable: the runner's tasks
    are created inside the lifespan and inherit it."""
    clients: dict[str, httpx2.AsyncClient] = {}
    token = _shared.set(clients)
    try:
        yield
    finally:
        _shared.reset(token)
        await asyncio.gather(*(shared.aclose() for shared in clients.values()), return_exceptions=True)


@contextlib.asynccontextmanager
async def client_for(service: str) -> AsyncIterator[httpx2.AsyncClient]:
    """The client of one step's calls to `service`: the runner's shared one under
    `service_clients()` (left open), else a client of the step's own, closed after it (a test's
    `run_until_idle`, a runner embedded without the lifespan). Timeouts stay per request."""
    clients = _shared.get()
    if clients is None:
        async with client() as own:
            yield own
        return
    shared = clients.get(service)
    if shared is None or shared.is_closed:
        shared = clients[service] = client(limits=POOL_LIMITS)
    yield shared


@contextlib.contextmanager
def use_transport(transport: httpx2.AsyncBaseTransport) -> Iterator[None]:
    """Route every client built by `client()` through `transport` (e.g. httpx2.MockTransport)."""
    global _transport
    previous, _transport = _transport, transport
    try:
        yield
    finally:
        _transport = previous


@contextlib.contextmanager
def calling(service: str) -> Iterator[None]:
    """Turn network failures of a call into retryable errors naming the service."""
    try:
        yield
    except httpx2.TimeoutException as exc:
        raise ServiceUnavailable(f"{service} timed out ({type(exc).__name__})") from exc
    except httpx2.RemoteProtocolError as exc:
        raise ServiceUnavailable(f"{service} connection lost ({exc})") from exc
    except httpx2.TransportError as exc:
        raise ServiceUnavailable(f"{service} unreachable ({type(exc).__name__}: {exc})") from exc


def retry_after_seconds(value: str | None, now: dt.datetime | None = None) -> float | None:
    """A Retry-After header in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    return max(0.0, (when - now).total_seconds())


def raise_for_status(response: httpx2.Response, service: str) -> None:
    status = response.status_code
    if status < 400:
        return
    if status == 429 or status >= 500:
        message = f"{service} returned {status}"
        seconds = retry_after_seconds(response.headers.get("Retry-After"))
        if seconds is not None:
            raise RetryAfter(seconds, message)
        raise ServiceUnavailable(message)
    raise CriticalError(f"{service} returned {status}: {response.text[:ERROR_TEXT_LIMIT]}")


def json_body(response: httpx2.Response, service: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidReply(
            f"{service} returned invalid JSON ({exc}): {response.text[:ERROR_TEXT_LIMIT]!r}"
        ) from None
