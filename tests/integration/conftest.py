"""The engine over the Django store, on SQLite or PostgreSQL (whatever DATABASE_URL names)."""

from __future__ import annotations

import pytest

from tests.harness import Harness, django_store, engine_db, threaded_h
from workflows.storage.django import DjangoStore

__all__ = ["django_store", "engine_db", "threaded_h"]


@pytest.fixture
def h(threaded_h) -> Harness:
    """Here the store's calls run in Django's database thread, the rows committed: these tests
    look at them from other connections (a step's thread, a runner's, the inspector's)."""
    return threaded_h


@pytest.fixture
def runner_store():
    """A runner's store (PostgreSQL): database threads, step commits, claims and resume reads
    on connections of its own in the event loop."""
    from workflows.storage.django.async_commits import AsyncCommits
    from workflows.storage.django.loop_connectors import PostgresLoop

    store = DjangoStore(db_threads=2, connector=PostgresLoop)
    assert isinstance(store.connector.group, AsyncCommits) and store.connector.reads is not None
    yield store
    store.close()
