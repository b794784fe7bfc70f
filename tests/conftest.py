"""Shared fixtures. Tests run on whatever DATABASE_URL names (SQLite file by default)."""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    """Browser tests need Debian's chromium; CI (REQUIRE_BROWSER=1) fails rather than skips."""
    if shutil.which("chromium") or os.environ.get("REQUIRE_BROWSER") == "1":
        return
    skip = pytest.mark.skip(reason="chromium not installed (apt-get install chromium)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session):
    """The SQLite test database is a file (config/settings.py) that pytest-django deletes at the
    end, but not its `-wal` / `-shm` companions, which SQLite removes only when the last connection
    closes: a connection opened in an async test's context is never closed (see below). Remove
    them once the database itself is gone, so a test run leaves nothing in var/."""
    from django.conf import settings

    if not settings.configured:
        return
    database = settings.DATABASES["default"]
    if not database["ENGINE"].endswith("sqlite3"):
        return
    name = (database.get("TEST") or {}).get("NAME")
    if not name or os.path.exists(name):
        return
    for suffix in ("-wal", "-shm", "-journal"):
        try:
            os.remove(f"{name}{suffix}")
        except FileNotFoundError:
            pass


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """The test process connects without a pool (DATABASE_POOL): the connections its async tests
    open in asgiref's contexts are never closed (see below), so they would drain any pool. The
    processes tests start (runners, daphne) keep the pool, as in production."""
    from django.conf import settings

    for database in settings.DATABASES.values():  # the read replica's too (READ_DATABASE_URL)
        database.get("OPTIONS", {}).pop("pool", None)


@pytest.fixture(scope="session", autouse=True)
def _lists_read_the_primary():
    """With READ_DATABASE_URL set, config/settings.py adds the alias "replica" (a test mirror of the
    default database: it gets no test database of its own) and points WORKFLOWS["READ_DATABASE"] at
    it. A test's rows sit in its transaction on the default connection, which another connection
    cannot see, so the suite's lists read the primary; the replica's tests set their own
    (tests/inspector/test_read_database.py, tests/acceptance/test_read_replica.py)."""
    from django.conf import settings

    if settings.configured and isinstance(getattr(settings, "WORKFLOWS", None), dict):
        settings.WORKFLOWS["READ_DATABASE"] = None


@pytest.fixture(scope="session", autouse=True)
def _async_calls_join_the_test_transaction():
    """A test's rows sit in its transaction on Django's connection, which the default store's own
    event-loop connections (WORKFLOWS["ASYNC_CONNECTIONS"]) cannot see and would write past: the
    suite's async starts and reads go through Django's thread. The processes tests start (web
    servers) keep them, as in production, and tests/integration/test_async_connections.py sets
    its own."""
    from django.conf import settings

    from workflows import conf

    if settings.configured and isinstance(getattr(settings, "WORKFLOWS", None), dict):
        settings.WORKFLOWS["ASYNC_CONNECTIONS"] = 0
        conf.default_store.cache_clear()


@pytest.fixture(autouse=True)
def _close_engine_thread_connections():
    """The engine's store runs ORM calls in asgiref's single sync thread; close that thread's
    connection after each test so test databases can be flushed and dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture(scope="session", autouse=True)
def _drop_stray_connections_at_the_end(django_db_setup, django_db_blocker):
    """Connections opened by ORM reads inside async tests belong to the test's asyncio context
    (asgiref's Local), so nothing closes them when the test ends, and PostgreSQL refuses to DROP
    a database with sessions. Set up after the test database, this ends them before the drop."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
