"""The claim's pick over several workflows: claim order across them (priority, then due time),
SKIP LOCKED that still finds `limit` runs past another claim's locks, and (PostgreSQL) a claim
commit that does not wait for the disk without leaving the connection that way for the commits
after it. Racing claimers over several workflows: test_store.py."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support import now
from workflows.core.new_run import NewRun
from workflows.models import Run
from workflows.storage.django import DjangoStore
from workflows.storage.django.notify import _libpq_params

pytestmark = pytest.mark.django_db

WORKFLOWS = ["wa", "wb", "wc"]
pg_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks and synchronous_commit are PostgreSQL's"
)


def make(workflow: str, key: str, *, due_ago: float, priority: int = 0) -> str:
    run, _ = DjangoStore().get_or_create_run(
        NewRun(workflow=workflow, key=[key], version="v", initial_state={}, now=now(), priority=priority)
    )
    Run.objects.filter(id=run.id).update(wake_at=now() - dt.timedelta(seconds=due_ago))
    return run.id


def claim(store: DjangoStore, limit: int, owner: str = "x") -> list[str]:
    return [
        r.id for r in store.claim(owner=owner, workflows=WORKFLOWS, limit=limit, lease_seconds=30, now=now())
    ]


def test_claim__across_workflows_takes_priority_first_then_the_longest_due():
    runs = {
        "c-old": make("wc", "old", due_ago=50),
        "a-mid": make("wa", "mid", due_ago=30),
        "b-vip": make("wb", "vip", due_ago=1, priority=5),
        "b-older": make("wb", "older", due_ago=40),
        "a-new": make("wa", "new", due_ago=10),
        "c-vip": make("wc", "vip", due_ago=2, priority=5),
    }
    make("other", "not-served", due_ago=100, priority=9)
    Run.objects.filter(id=runs["a-new"]).update(wake_at=now() + dt.timedelta(hours=1))  # not due
    store = DjangoStore()
    names = {run_id: name for name, run_id in runs.items()}
    assert [names[r] for r in claim(store, 3)] == ["c-vip", "b-vip", "c-old"]
    assert [names[r] for r in claim(store, 3)] == ["b-older", "a-mid"]
    assert claim(store, 3) == []


@pg_only
@pytest.mark.django_db(transaction=True)
def test_claim__skips_the_runs_another_claim_has_locked_and_still_takes_its_limit():
    ordered = [make(WORKFLOWS[i % 3], f"r{i}", due_ago=100 - i) for i in range(6)]
    with psycopg.connect(**_libpq_params(), autocommit=False) as other:
        other.execute(
            "SELECT id FROM workflows_run WHERE id = ANY(%s) FOR UPDATE", [[*map(_uuid, ordered[:2])]]
        )  # another runner's claim, in progress on the first two in line
        assert claim(DjangoStore(), 2) == ordered[2:4]
        other.rollback()
    assert claim(DjangoStore(), 5) == ordered[:2] + ordered[4:]


@pg_only
@pytest.mark.django_db(transaction=True)
def test_claim__never_comes_back_short_however_many_runs_other_claims_hold():
    ordered = [make("wa", f"r{i}", due_ago=100 - i) for i in range(7)]
    with psycopg.connect(**_libpq_params(), autocommit=False) as other:
        other.execute(
            "SELECT id FROM workflows_run WHERE id = ANY(%s) FOR UPDATE", [[*map(_uuid, ordered[:5])]]
        )  # runners claiming at once hold the first five in line
        store = DjangoStore()
        taken = [r.id for r in store.claim(owner="x", workflows=["wa"], limit=2, lease_seconds=30, now=now())]
        assert taken == ordered[5:]
        other.rollback()


def setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def synchronous_commit() -> str:
    return setting("synchronous_commit")


@pg_only
@pytest.mark.django_db(transaction=True)
def test_claim__does_not_wait_for_the_disk_and_leaves_the_connection_as_it_found_it():
    make("wa", "one", due_ago=1)
    assert synchronous_commit() == "on"  # the server's default, which the claim must not change
    with CaptureQueriesContext(connection) as seen:
        assert len(claim(DjangoStore(), 1)) == 1
    claim_sql = [q["sql"] for q in seen.captured_queries if "SKIP LOCKED" in q["sql"]]
    assert len(claim_sql) == 1 and "set_config('synchronous_commit', 'off', true)" in claim_sql[0]
    assert any("force_generic_plan" in q["sql"] for q in seen.captured_queries)
    assert synchronous_commit() == "on"  # only the claim's own transaction did not wait
    assert setting("plan_cache_mode") == "auto"  # nor did the generic plan outlive it


@pg_only
def test_claim__inside_a_callers_transaction_leaves_its_commit_waiting_for_the_disk():
    make("wa", "one", due_ago=1)
    assert connection.in_atomic_block  # the test's transaction, as a caller's atomic block
    assert len(claim(DjangoStore(), 1)) == 1
    assert synchronous_commit() == "on"  # the claim did not make the caller's transaction lazy
    assert setting("plan_cache_mode") == "auto"


def _uuid(run_id: str) -> str:
    return str(Run._meta.pk.to_python(run_id))
