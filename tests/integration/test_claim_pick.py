"""The claim's pick over several workflows: claim order across them (priority, then due time),
SKIP LOCKED that still finds `limit` runs past another claim's locks, and (PostgreSQL) a claim
commit that does not wait for the disk without leaving the connection that way for the commits
after it; a resumed run's history and messages read in the claim's round trip. Racing claimers
over several workflows: test_store.py."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows.core.records import AttemptWrite, Commit, EntryWrite, OutgoingMessage
from workflows.models import Run
from workflows.storage.django import DjangoStore
from workflows.storage.django import store as store_module
from workflows.storage.django.notify import _libpq_params

pytestmark = pytest.mark.django_db

WORKFLOWS = ["wa", "wb", "wc"]
pg_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks and synchronous_commit are PostgreSQL's"
)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def make(workflow: str, key: str, *, due_ago: float, priority: int = 0) -> str:
    run, _ = DjangoStore().get_or_create_run(
        workflow=workflow, key=[key], version="v", initial_state={}, now=now(), priority=priority
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


# --- a resumed run's reads, sent with the claim that resumed it (PostgreSQL) ------------------------


def step_commit(position: int) -> Commit:
    entry = EntryWrite(
        id=None, scope="", position=position, name=f"s{position}", kind="step", status="completed",
        output=position, attempts=1,
    )  # fmt: skip
    return Commit(
        entries=[(entry, AttemptWrite(number=1, started_at=now(), finished_at=now(), outcome="ok"))]
    )


def resumable(store: DjangoStore, key: str, *, steps: int, messages: int) -> str:
    """A run that ran `steps` steps, was released (waiting, due again) and has `messages` unread."""
    run_id = make("wa", key, due_ago=1)
    [run] = store.claim(owner="first", workflows=["wa"], limit=1, lease_seconds=30, now=now())
    for position in range(steps):
        store.commit(run_id=run_id, owner="first", commit=step_commit(position), now=now())
    Run.objects.filter(id=run_id).update(
        status="waiting", lease_owner="", wake_at=now() - dt.timedelta(seconds=1)
    )
    for i in range(messages):
        store.send(OutgoingMessage(queue="start", body={"n": i}, run_id=run_id), now=now())
    return run.id


@pg_only
@pytest.mark.django_db(transaction=True)  # the claim in its own transaction: a pipeline
def test_claim__reads_a_resumed_runs_history_and_messages_in_the_same_round_trip():
    store = DjangoStore()
    run_id = resumable(store, "resumed", steps=3, messages=2)
    fresh_id = make("wa", "fresh", due_ago=2)
    with CaptureQueriesContext(connection) as seen:
        runs = {
            r.id: r for r in store.claim(owner="x", workflows=["wa"], limit=5, lease_seconds=30, now=now())
        }
    assert set(runs) == {run_id, fresh_id} and runs[fresh_id].fresh and not runs[run_id].fresh
    assert any("FROM workflows_entry" in q["sql"] for q in seen.captured_queries)
    with CaptureQueriesContext(connection) as seen:
        history, messages = async_to_sync(store.aload_resume)(run_id)
    assert seen.captured_queries == []  # read with the claim
    assert history == store.load_history(run_id) and [e.name for e in history] == ["s0", "s1", "s2"]
    assert messages == store.available_messages(run_id, None, 10) and [m.body for m in messages] == [
        {"n": 0},
        {"n": 1},
    ]
    assert fresh_id not in store._resumes  # a fresh run reads nothing
    with CaptureQueriesContext(connection) as seen:
        assert async_to_sync(store.aload_resume)(run_id) == (history, messages)
    assert seen.captured_queries  # taken once: a second execution reads again


@pg_only
@pytest.mark.django_db(transaction=True)  # the claim in its own transaction: a pipeline
def test_claim__more_unread_messages_than_a_resume_holds_are_left_to_the_waits(monkeypatch):
    monkeypatch.setattr(store_module, "RESUME_MESSAGES", 2)
    store = DjangoStore()
    run_id = resumable(store, "busy", steps=1, messages=3)
    store.claim(owner="x", workflows=["wa"], limit=1, lease_seconds=30, now=now())
    history, messages = async_to_sync(store.aload_resume)(run_id)
    assert [e.name for e in history] == ["s0"] and messages is None


@pg_only
def test_claim__a_taken_over_run_reads_its_history_after_its_lost_attempts_are_recorded():
    store = DjangoStore()
    run_id = resumable(store, "lapsed", steps=1, messages=0)
    Run.objects.filter(id=run_id).update(
        status="running", lease_owner="dead", wake_at=now() - dt.timedelta(seconds=1)
    )
    [run] = store.claim(owner="x", workflows=["wa"], limit=1, lease_seconds=30, now=now())
    assert run.taken_over and run_id not in store._resumes
