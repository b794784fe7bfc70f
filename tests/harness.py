"""The engine's tests over the real store (`DjangoStore`) on the test database (SQLite, or
PostgreSQL with DATABASE_URL), with a clock that skips ahead: the `h` fixture of tests/unit and
tests/integration, and what those tests read of the tables."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from workflows.core.clock import FakeClock
from workflows.engine.client import WorkflowClient
from workflows.engine.registry import Registry
from workflows.models import Entry, Message, Run
from workflows.storage.django import DjangoStore
from workflows.testing import arun_until_idle


class CountingStore(DjangoStore):
    """The real store, counting its commits."""

    commits = 0

    def commit(self, **kwargs):
        self.commits += 1
        return super().commit(**kwargs)


class Harness:
    """What the engine tests need of a store, besides the Store interface itself."""

    def __init__(self) -> None:
        self.store = CountingStore()
        self.clock = FakeClock(dt.datetime.now(dt.UTC))

    def client(self, registry: Registry, name: str) -> WorkflowClient:
        return WorkflowClient(registry, name, store=self.store, clock=self.clock)

    async def run(self, registry: Registry) -> None:
        await arun_until_idle(registry, store=self.store, clock=self.clock)

    def entries(self, run_id: str):
        return {e.name: e for e in self.store.load_history(run_id)}

    def attempts(self, run_id: str, name: str):
        return Entry.objects.get(id=self.entries(run_id)[name].id).attempt_history()

    def wake_early(self, run_id: str) -> None:
        Run.objects.filter(id=run_id).update(wake_at=self.clock.now())

    def steal_lease(self, run_id: str, owner: str) -> None:
        Run.objects.filter(id=run_id).update(lease_owner=owner)

    def message_count(self) -> int:
        return Message.objects.count()


@pytest.fixture
def engine_db(transactional_db):
    """The test database as the engine's tests use it. The store runs its calls in Django's
    database thread (its own connection, so the test's rows must be committed: transactional_db);
    an async test reads the tables from the event loop's thread, which Django allows only with
    DJANGO_ALLOW_ASYNC_UNSAFE."""
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def h(engine_db) -> Harness:
    return Harness()


@pytest.fixture
def django_store(engine_db) -> DjangoStore:
    """The real store, for a test that drives a `Runner` (or the store) itself."""
    return DjangoStore()
