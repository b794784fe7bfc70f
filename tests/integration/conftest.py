"""The engine over the Django store, on SQLite or PostgreSQL (whatever DATABASE_URL names)."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from tests.unit.conftest import Counting, Harness
from workflows.core.clock import FakeClock
from workflows.models import Entry, Message, Run
from workflows.storage.django import DjangoStore


class CountingDjangoStore(Counting, DjangoStore):
    pass


class DjangoHarness(Harness):
    """The unit tests' harness over the real tables."""

    def __init__(self) -> None:
        super().__init__(CountingDjangoStore(), FakeClock(dt.datetime.now(dt.UTC)))

    def attempts(self, run_id: str, name: str):
        return Entry.objects.get(id=self.entries(run_id)[name].id).attempt_history()

    def wake_early(self, run_id: str) -> None:
        Run.objects.filter(id=run_id).update(wake_at=self.clock.now())

    def steal_lease(self, run_id: str, owner: str) -> None:
        Run.objects.filter(id=run_id).update(lease_owner=owner)

    def message_count(self) -> int:
        return Message.objects.count()


@pytest.fixture
def h(transactional_db):
    # The engine writes from Django's database thread; the test reads from its own thread.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    try:
        yield DjangoHarness()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


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
