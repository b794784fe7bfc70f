"""The engine's tests over the real store (`DjangoStore`) on the test database (SQLite, or
PostgreSQL with DATABASE_URL), with a clock that skips ahead, and what those tests read of the
tables. Two ways to run it: `h` (tests/unit), every call on the test's own connection inside the
test's transaction, rolled back at its end; `threaded_h` (the `h` of tests/integration), calls
in Django's database thread as a web process makes them, the rows committed and the tables
flushed after the test (for tests that need a second connection to see them)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connections

from workflows.core.clock import FakeClock
from workflows.engine.client import WorkflowClient
from workflows.engine.registry import Registry
from workflows.models import Entry, Message, Run
from workflows.storage.django import DjangoStore
from workflows.storage.django.connectors import Connector
from workflows.storage.django.reconnect import reconnecting
from workflows.testing import arun_until_idle


class CountingStore(DjangoStore):
    """The real store, counting its commits."""

    commits = 0

    def commit(self, **kwargs):
        self.commits += 1
        return super().commit(**kwargs)


class InLoop(Connector):
    """A connector for the unit tests: every call right here on the event loop's thread, one at a
    time, on the test's own connection, inside the test's transaction (rolled back at its end: no
    table to flush)."""

    name = "in-loop"

    async def run_sync(self, fn, *args, **kwargs):
        return reconnecting(fn)(*args, **kwargs)


def in_loop_store() -> CountingStore:
    """The real store over the `InLoop` connector."""
    store = CountingStore()
    store.connector = InLoop(0, lambda **kwargs: store.commit(**kwargs))
    return store


class Harness:
    """What the engine tests need of a store, besides the Store interface itself."""

    def __init__(self, store: CountingStore) -> None:
        self.store = store
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
def engine_db(transactional_db, monkeypatch):
    """The test database for the store's calls in Django's database thread (its own connection,
    so the rows are committed: transactional_db), the test reading the tables from the event
    loop's thread, which Django allows only with DJANGO_ALLOW_ASYNC_UNSAFE."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")


@pytest.fixture
def transaction_connection(db):
    """The connection that holds the test's transaction (the main thread's)."""
    return connections["default"]


@pytest.fixture
async def h(transaction_connection, monkeypatch) -> Harness:
    """The harness, its store's calls and the test's reads on the test's connection: in an event
    loop Django gives each asyncio context a connection of its own, so the test's context (which
    its tasks inherit) is given the one holding the test's transaction."""
    connections["default"] = transaction_connection
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")  # ORM calls on the loop's thread
    return Harness(in_loop_store())


@pytest.fixture
def threaded_h(engine_db) -> Harness:
    return Harness(CountingStore())


@pytest.fixture
def django_store(engine_db) -> DjangoStore:
    """The real store, for a test that drives a `Runner` (or the store) itself."""
    return DjangoStore()
