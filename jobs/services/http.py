"""The one HTTP seam of the example app: the client factory, and HTTP failures sorted into
retryable errors and `CriticalError`s."""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import functools
import json
import ssl
from collections.abc import Iterator
from typing import Any

import httpx

from workflows import CriticalError, RetryAfter

DEFAULT_TIMEOUT = 30.0  # seconds: CRM and CMS calls; model calls pass their own
ERROR_TEXT_LIMIT = 500  # characters of a response body quoted in an error

_transport: httpx.AsyncBaseTransport | None = None


class ServiceUnavailable(Exception):
    """The service failed in a way worth retrying (429, 5xx, network error, timeout)."""


class InvalidReply(Exception):
    """The service answered 2xx with something we cannot use (e.g. not JSON): retried."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~40 ms of CPU: once per process, not once per step.
    return httpx.create_ssl_context()


def client(**kwargs: Any) -> httpx.AsyncClient:
    """A client for one step's calls. Tests route it through `use_transport(...)`."""
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    kwargs.setdefault("verify", _ssl_context())
    return httpx.AsyncClient(transport=_transport, **kwargs)


@contextlib.contextmanager
def use_transport(transport: httpx.AsyncBaseTransport) -> Iterator[None]:
    """Route every client built by `client()` through `transport` (e.g. httpx.MockTransport)."""
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
    except httpx.TimeoutException as exc:
        raise ServiceUnavailable(f"{service} timed out ({type(exc).__name__})") from exc
    except httpx.RemoteProtocolError as exc:
        raise ServiceUnavailable(f"{service} connection lost ({exc})") from exc
    except httpx.TransportError as exc:
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


def raise_for_status(response: httpx.Response, service: str) -> None:
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


def json_body(response: httpx.Response, service: str) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidReply(
            f"{service} returned invalid JSON ({exc}): {response.text[:ERROR_TEXT_LIMIT]!r}"
        ) from None
