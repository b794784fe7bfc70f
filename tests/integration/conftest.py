"""The engine over the Django store, on SQLite or PostgreSQL (whatever DATABASE_URL names)."""

from __future__ import annotations

import pytest

from tests.harness import django_store, engine_db, h
from workflows.storage.django import DjangoStore

__all__ = ["django_store", "engine_db", "h"]


@pytest.fixture
def runner_store():
    """A runner's store (PostgreSQL): database threads, step commits, claims and resume reads
    on connections of its own in the event loop."""
    from workflows.storage.django.async_commits import AsyncCommits

    store = DjangoStore(db_threads=2)
    assert isinstance(store._group, AsyncCommits) and store._reads is not None
    yield store
    store.close()
