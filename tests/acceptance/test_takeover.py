"""Same-host takeover with real runner processes: a runner killed with SIGKILL mid-step and
started again takes its run over at once, though the lease (300 s here) has far to run; a runner
never takes the runs of a live runner. Presence rows come and go with the processes."""

from __future__ import annotations

import signal

import pytest

from tests.support import wait_for
from workflows.models import Attempt, Entry, Run, RunnerPresence

from .flows import registry

LONG_LEASE = "300"  # a takeover must not wait for it: every wait below is far shorter


@pytest.fixture
def long_lease(runners, monkeypatch):
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {
            **env(),
            "WORKFLOWS_LEASE_SECONDS": LONG_LEASE,
            "WORKFLOWS_HEARTBEAT_SECONDS": "1",
        },
    )
    return runners


def presence_of(proc) -> RunnerPresence | None:
    return RunnerPresence.objects.filter(pid=proc.pid).first()


def block_running(run_id: str) -> bool:
    return Entry.objects.filter(run_id=run_id, name="block", status="running").exists()


def test_sigkill_then_restart__the_new_runner_takes_over_at_once(long_lease):
    runners = long_lease
    handle = registry.client("crash").get_or_create(["takeover"])
    first = runners.start()
    wait_for(lambda: block_running(handle.run_id), what="the first runner to show the slow step running")
    dead = presence_of(first)
    assert dead is not None and dead.workflows.keys() >= {"crash", "many"}
    first.kill()
    first.wait(10)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "running" and run.lease_owner == dead.owner  # held: the lease has ~300 s to go
    (runners.workdir / "release").touch()
    second = runners.start()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status == "completed",
        timeout=60,
        what="the restarted runner to take the run over and finish it (the lease alone would take 300 s)",
    )
    ledger = runners.ledger()
    assert ledger["takeover one"] == 1 and ledger["takeover two"] == 1  # recorded: never again
    assert ledger["takeover block:start"] == 2 and ledger["takeover four"] == 1
    [lost] = Attempt.objects.filter(entry__run_id=handle.run_id, entry__name="block", outcome="lost")
    assert f"runner {dead.owner} died" in lost.error["message"]  # recorded as for a lapsed lease
    assert "its process on this host is gone" in lost.error["message"]
    assert not RunnerPresence.objects.filter(owner=dead.owner).exists()  # the dead one is forgotten
    assert presence_of(second) is not None
    second.send_signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert presence_of(second) is None  # a graceful stop removes its presence


def test_a_live_runners_runs_are_never_taken_over(long_lease):
    runners = long_lease
    handle = registry.client("crash").get_or_create(["alive"])
    first = runners.start()
    wait_for(lambda: block_running(handle.run_id), what="the first runner to enter the slow step")
    owner = presence_of(first).owner
    # A second runner on this host starts, looks for dead runners, finds none, and exits idle.
    assert runners.start("--until-idle").wait(60) == 0
    run = Run.objects.get(id=handle.run_id)
    assert (run.status, run.lease_owner) == ("running", owner)
    assert runners.ledger()["alive block:start"] == 1
    (runners.workdir / "release").touch()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status == "completed", what="the first runner to finish"
    )
    assert runners.ledger()["alive block:start"] == 1
    first.send_signal(signal.SIGTERM)
    assert first.wait(30) == 0
