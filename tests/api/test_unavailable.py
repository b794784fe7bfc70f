"""Infrastructure errors answer 503 in the one JSON shape with Retry-After, on the project's API
(the one NinjaAPI serving /api/ and /jobs). The handlers are called with the exceptions the
database layer raises; the real outage (a PostgreSQL server stopped under a running daphne) is
tests/acceptance/test_web_outage.py."""

from __future__ import annotations

import json

import pytest
from django.db import InterfaceError, OperationalError
from django.test import RequestFactory

from config.api import api
from workflows.core.exceptions import StoreUnavailable
from workflows.http.errors import RETRY_AFTER_SECONDS, UNAVAILABLE


def _exceptions() -> list[Exception]:
    found: list[Exception] = [
        OperationalError("server closed the connection unexpectedly"),
        InterfaceError("connection already closed"),
        StoreUnavailable("the database failed: deadlock detected"),
    ]
    try:
        import psycopg_pool
    except ImportError:
        return found
    return [*found, psycopg_pool.PoolTimeout("couldn't get a connection after 1.00 sec")]


@pytest.mark.parametrize("exc", _exceptions(), ids=lambda e: type(e).__name__)
def test_infrastructure_errors__are_503_json_with_retry_after(exc):
    request = RequestFactory().post("/jobs", data="{}", content_type="application/json")

    response = api.on_exception(request, exc)

    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS) and 1 <= RETRY_AFTER_SECONDS <= 5
    error = json.loads(response.content)["error"]
    assert error["code"] == "unavailable" and error["detail"] is None
    assert str(exc) not in error["message"]  # the cause (hosts, users) stays in the log


def test_the_unavailable_errors_include_the_pool_timeout():
    psycopg_pool = pytest.importorskip("psycopg_pool")
    assert issubclass(psycopg_pool.PoolTimeout, UNAVAILABLE)
    assert issubclass(psycopg_pool.TooManyRequests, UNAVAILABLE)  # a full waiting queue


def test_a_domain_error_keeps_its_status():
    from workflows.core.exceptions import RunNotFound

    response = api.on_exception(RequestFactory().get("/jobs/x"), RunNotFound("no run"))
    assert response.status_code == 404 and "Retry-After" not in response
