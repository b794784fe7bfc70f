"""A step that succeeds at its first attempt stores no attempt row: its entry says all of it
(number 1, ok, the entry's start and end), and every reader gets it back from
`Entry.attempt_history` (the API, the inspector, the CLI, task results, the dashboard's count).
Any other attempt is stored as before. On SQLite and PostgreSQL (whatever DATABASE_URL names)."""

from __future__ import annotations

import datetime as dt

import pytest

from workflows import setup, workflow
from workflows.core.records import AttemptWrite, EntryWrite
from workflows.models import Attempt, Entry, implied_attempts
from workflows.reads import runs as api_selectors
from workflows.storage.django.plain_commits import stored_attempt

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(seconds=2)


def _flaky_once():
    async def body(ctx):
        async def fetch(step):
            return 1

        async def enrich(step):
            if step.attempt == 1:
                raise RuntimeError("503 from the CRM")
            return 2

        await ctx.step("fetch", fetch)
        return await ctx.step("enrich", enrich, retry_backoff_base=0.001)

    return setup(use={"wf": workflow(body)})


async def test_a_first_try_success_stores_no_attempt_row_and_is_read_back_as_its_attempt(h):
    reg = _flaky_once()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "completed"

    fetch = Entry.objects.get(run_id=handle.run_id, name="fetch")
    enrich = Entry.objects.get(run_id=handle.run_id, name="enrich")
    assert not Attempt.objects.filter(entry=fetch).exists()
    assert [a.outcome for a in Attempt.objects.filter(entry=enrich).order_by("number")] == ["error", "ok"]

    [implied] = fetch.attempt_history()
    assert (implied.number, implied.outcome, implied.error, implied.delay, implied.retry_at) == (
        1, "ok", None, None, None,
    )  # fmt: skip
    assert (implied.started_at, implied.finished_at) == (fetch.started_at, fetch.finished_at)
    assert implied.pk is None and implied.entry_id == fetch.id
    assert [a.outcome for a in enrich.attempt_history()] == ["error", "ok"]
    # Counted once each: fetch by its entry, enrich by its rows.
    assert list(Entry.objects.filter(implied_attempts()).values_list("name", flat=True)) == ["fetch"]

    # The API's run detail gives both steps their attempts.
    run = api_selectors.run_detail(handle.run_id)
    assert {e.name: [a.outcome for a in e.attempt_history()] for e in run.entries.all()} == {
        "fetch": ["ok"], "enrich": ["error", "ok"],
    }  # fmt: skip


def _entry(**changes) -> EntryWrite:
    fields = {
        "id": None, "scope": "", "position": 0, "name": "s", "kind": "step", "status": "completed",
        "attempts": 1, "started_at": T0, "finished_at": T1,
    }  # fmt: skip
    return EntryWrite(**{**fields, **changes})


def _attempt(**changes) -> AttemptWrite:
    return AttemptWrite(**{"number": 1, "started_at": T0, "finished_at": T1, "outcome": "ok", **changes})


def test_only_what_the_entry_says_all_of_is_left_unstored():
    assert stored_attempt(_entry(), _attempt()) is None
    assert stored_attempt(_entry(), None) is None
    kept = [
        (_entry(id=7), _attempt()),  # an entry written before (a running marker): its times may differ
        (_entry(attempts=2), _attempt(number=2)),  # a retried success
        (_entry(status="retrying"), _attempt(outcome="error", error={"message": "x"}, delay=1.0)),
        (_entry(status="failed"), _attempt(outcome="critical")),
        (_entry(kind="sleep"), _attempt()),
        (_entry(started_at=T0 - dt.timedelta(seconds=1)), _attempt()),  # started before the attempt
        (_entry(finished_at=None), _attempt()),
        (_entry(), _attempt(delay=0.0)),
    ]
    for write, attempt in kept:
        assert stored_attempt(write, attempt) is attempt, (write, attempt)


@pytest.mark.django_db
def test_an_entry_with_its_attempts_stored_gets_them_and_nothing_implied():
    from workflows.models import Run

    run = Run.objects.create(
        workflow="wf", key=["k"], key_text='["k"]', key_hash="h", created_at=T0, updated_at=T0
    )
    # Written before steps stored no row for a first-try success: read as stored.
    old = Entry.objects.create(
        run=run,
        position=0,
        name="a",
        kind="step",
        status="completed",
        attempts=1,
        started_at=T0,
        finished_at=T1,
    )
    Attempt.objects.create(entry=old, number=1, started_at=T0, finished_at=T1, outcome="ok")
    running = Entry.objects.create(run=run, position=1, name="b", kind="step", status="running", attempts=0)
    assert [a.pk is not None for a in old.attempt_history()] == [True]
    assert running.attempt_history() == []
    assert not Entry.objects.filter(implied_attempts()).exists()
