"""The engine over the Django store, on SQLite or PostgreSQL (whatever DATABASE_URL names)."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from workflows.client import WorkflowClient
from workflows.clock import FakeClock
from workflows.definition import Registry
from workflows.django_store import DjangoStore
from workflows.models import Attempt, Message, Run
from workflows.testing import arun_until_idle


class CountingDjangoStore(DjangoStore):
    def __init__(self) -> None:
        super().__init__()
        self.commits = 0

    def commit(self, **kwargs):
        self.commits += 1
        return super().commit(**kwargs)


class DjangoHarness:
    """Same surface as the unit tests' Harness, over the real tables."""

    def __init__(self) -> None:
        self.store = CountingDjangoStore()
        self.clock = FakeClock(dt.datetime.now(dt.UTC))

    def client(self, registry: Registry, name: str) -> WorkflowClient:
        return WorkflowClient(registry, name, store=self.store, clock=self.clock)

    async def run(self, registry: Registry) -> None:
        await arun_until_idle(registry, store=self.store, clock=self.clock)

    def entries(self, run_id: str):
        return {e.name: e for e in self.store.load_history(run_id)}

    def attempts(self, run_id: str, name: str):
        entry_id = self.entries(run_id)[name].id
        return list(Attempt.objects.filter(entry_id=entry_id).order_by("number"))

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
