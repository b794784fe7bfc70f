"""Pause a run mid-step under a real runner process: the step finishes and records its result,
the run stops at its next entry, is handed back paused (no lease) and is not claimed again until
resumed; then it finishes, each step run once. A paused workflow's new runs are not claimed."""

from __future__ import annotations

import signal

from tests.support import wait_for
from workflows import operations
from workflows.models import Run

from .flows import registry


def run_of(run_id: str) -> Run:
    return Run.objects.get(id=run_id)


def test_a_run_paused_mid_step_finishes_the_step_then_is_held_until_resumed(runners):
    handle = registry.client("crash").get_or_create(["held"])
    proc = runners.start()
    wait_for(lambda: runners.ledger()["held block:start"] == 1, what="the runner to enter the blocking step")

    run = operations.pause_run(handle.run_id, actor="ops", reason="look first")
    assert run.status == "running" and run.pause_requested  # asked: its runner holds it
    (runners.workdir / "release").touch()
    wait_for(lambda: run_of(handle.run_id).status == "paused", what=f"the run to stop\n{runners.said()}")
    run = run_of(handle.run_id)
    assert run.lease_owner == "" and run.wake_at is None and not run.pause_requested
    assert run.entries.get(name="block").status == "completed"  # the step in flight recorded its result

    # The runner goes on claiming (another run completes) but not the paused one.
    other = registry.client("many").get_or_create(["other"])
    wait_for(lambda: run_of(other.run_id).status == "completed", what="another run to complete")
    assert run_of(handle.run_id).status == "paused" and runners.ledger()["held four"] == 0

    operations.resume_run(handle.run_id, actor="ops", reason="go on")
    wait_for(lambda: run_of(handle.run_id).status == "completed", what=f"the resumed run\n{runners.said()}")
    ledger = runners.ledger()
    assert [ledger[f"held {s}"] for s in ("one", "two", "block:start", "four")] == [1, 1, 1, 1]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


def test_a_paused_workflows_runs_wait_for_its_resume(runners):
    operations.pause_workflow("many", actor="ops", reason="deploy")
    held = registry.client("many").get_or_create(["held"])
    proc = runners.start()
    free = registry.client("crash").get_or_create(["free"])
    (runners.workdir / "release").touch()
    wait_for(lambda: run_of(free.run_id).status == "completed", what="a run of another workflow")
    assert run_of(held.run_id).status == "pending" and runners.ledger()["held s1"] == 0

    operations.resume_workflow("many", actor="ops")
    wait_for(
        lambda: run_of(held.run_id).status == "completed", what=f"the resumed workflow\n{runners.said()}"
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
