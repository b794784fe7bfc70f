"""The real runner process: killed mid-step, two at once, stopped with SIGTERM."""

from __future__ import annotations

import signal

from tests.support import wait_for
from workflows.conf import default_store
from workflows.models import Run

from .flows import registry


def run_status(run_id):
    return Run.objects.get(id=run_id).status


def test_sigkill_mid_step__restart_finishes_without_rerunning_recorded_steps(runners):
    handle = registry.client("crash").get_or_create(["job"])
    first = runners.start()
    wait_for(lambda: runners.ledger()["job block:start"] == 1, what="the runner to enter the blocking step")
    first.kill()
    first.wait(10)
    assert run_status(handle.run_id) == "running"  # held by a dead runner until its lease lapses
    (runners.workdir / "release").touch()
    second = runners.start()
    wait_for(lambda: run_status(handle.run_id) == "completed", what="the run to complete after restart")
    ledger = runners.ledger()
    assert ledger["job one"] == 1 and ledger["job two"] == 1  # recorded before the kill: never again
    assert ledger["job block:start"] == 2  # at-least-once: the cut step ran again
    assert ledger["job four"] == 1
    assert handle.info().result == [1, 2, "released", 4]
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0


def test_sigkill_in_a_child__restart_finishes_child_then_parent_each_step_once(runners):
    parent = registry.client("parent").get_or_create(["fam"])
    first = runners.start()
    wait_for(
        lambda: runners.ledger()["fam-kid block:start"] == 1, what="the child to enter its blocking step"
    )
    first.kill()
    first.wait(10)
    (runners.workdir / "release").touch()
    second = runners.start()
    wait_for(lambda: run_status(parent.run_id) == "completed", what="the parent to complete after restart")
    child = Run.objects.get(workflow="crash", key=["fam-kid"])
    assert str(child.parent_id) == parent.run_id and child.status == "completed"
    ledger = runners.ledger()
    assert ledger["fam p1"] == 1 and ledger["fam p2"] == 1
    assert ledger["fam-kid one"] == 1 and ledger["fam-kid two"] == 1 and ledger["fam-kid four"] == 1
    assert parent.info().result == [1, 2, "released", 4]
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0


def test_two_runners__every_run_runs_each_step_exactly_once(runners):
    client = registry.client("many")
    ids = [client.get_or_create([f"r{i}"]).run_id for i in range(200)]
    procs = [runners.start("--concurrency", "8"), runners.start("--concurrency", "8")]
    wait_for(
        lambda: Run.objects.filter(id__in=ids, status="completed").count() == 200,
        timeout=120,
        what="200 runs to complete",
    )
    ledger = runners.ledger()
    for i in range(200):
        counts = [ledger[f"r{i} {s}"] for s in ("s1", "s2", "s3")]
        assert counts == [1, 1, 1], f"run r{i}: {counts}\n{runners.said()}"
    for proc in procs:
        runners.wait_up(proc)  # one of them may have done all 200 before the other was up
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_sigterm__lets_the_step_finish_then_hands_the_run_back(runners, monkeypatch):
    handle = registry.client("crash").get_or_create(["drain"])
    with monkeypatch.context() as m:  # this runner logs at INFO: the test waits for its stop line
        m.setattr(runners, "env", lambda env=runners.env: {**env(), "LOG_LEVEL": "INFO"})
        proc = runners.start()
    output = runners.output(proc)
    wait_for(lambda: runners.ledger()["drain block:start"] == 1, what="the runner to enter the blocking step")
    proc.send_signal(signal.SIGTERM)
    # Release the step only once the runner has taken the signal: the step is running when the
    # stop arrives, so it must finish, and the run is handed back before its next step.
    wait_for(
        lambda: output.has("stopping: no new claims; 1 run(s) finishing"),
        what="the runner to acknowledge SIGTERM with one run in its step",
    )
    assert runners.ledger()["drain block:end"] == 0
    (runners.workdir / "release").touch()
    assert proc.wait(30) == 0
    ledger = runners.ledger()
    assert ledger["drain block:end"] == 1  # the step was not cut
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "pending" and run.lease_owner == ""  # handed back at once, no lease to wait out
    assert run.entries.get(name="block").status == "completed"
    runners.start("--until-idle").wait(60)
    assert run_status(handle.run_id) == "completed"
    ledger = runners.ledger()
    assert ledger["drain block:start"] == 1 and ledger["drain four"] == 1


def test_until_idle__exits_when_nothing_is_due(runners):
    handle = registry.client("many").get_or_create(["idle"])
    proc = runners.start("--until-idle")
    assert proc.wait(60) == 0
    assert handle.info().status == "completed"
    assert default_store().next_wake_at(owner="", workflows=["many"]) is None
