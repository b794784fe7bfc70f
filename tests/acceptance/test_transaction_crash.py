"""A real runner SIGKILLed inside a transaction step, between its body's ORM write and the
step's record: neither survives; the restarted runner runs the body once more, and then both exist."""

from __future__ import annotations

from jobs.models import PublishedBrief
from tests.support import wait_for
from workflows.models import Entry, Run
from workflows.storage.django import DjangoStore

from .txn_flows import registry


def test_kill_between_the_orm_write_and_the_record__neither_stays(runners, monkeypatch):
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {**env(), "WORKFLOWS_REGISTRIES": "tests.acceptance.txn_flows.registry"},
    )
    handle = registry.client("transact", store=DjangoStore()).get_or_create(["t"])
    first = runners.start()
    # Its row is written (in the open transaction) before it says it started.
    wait_for(
        lambda: runners.ledger()["t record:start"] == 1, what="the transaction body to write", timeout=60
    )
    assert not PublishedBrief.objects.exists(), "the row is visible before the step's record"
    assert not Entry.objects.filter(run_id=handle.run_id, name="record").exists()
    first.kill()
    first.wait(10)
    assert not PublishedBrief.objects.exists(), "a killed runner's transaction left its row"
    assert not Entry.objects.filter(run_id=handle.run_id, name="record").exists()

    (runners.workdir / "release").touch()
    runners.start()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status in ("completed", "failed"),
        what="the run to finish after the restart",
        timeout=60,
    )
    run, ledger = handle.info(), runners.ledger()
    assert run.status == "completed" and run.result == [1, "recorded"], runners.said()
    assert ledger["t before"] == 1 and ledger["t record:start"] == 2 and ledger["t record:end"] == 1
    [row] = PublishedBrief.objects.all()
    entry = Entry.objects.get(run_id=handle.run_id, name="record", superseded=False)
    assert (entry.status, entry.output, row.run_id) == ("completed", "recorded", handle.run_id)
