"""SIGKILL of a real runner in the middle of a join, a loop, a rollback, a race and a step that
had already broadcast."""

from __future__ import annotations

from tests.support import wait_for
from workflows.core.records import LOST_EVENTS
from workflows.models import Entry, Event, Run

from .flows import registry


def kill_during(runners, key: str, marker: str, workflow: str, recorded: tuple[str, ...] = ()):
    """Kill the runner once `marker` has started and the steps named in `recorded` are stored."""
    handle = registry.client(workflow).get_or_create([key])
    first = runners.start()
    wait_for(lambda: runners.ledger()[f"{key} {marker}:start"] == 1, what=f"{marker} to start")
    wait_for(
        lambda: (
            Entry.objects.filter(run_id=handle.run_id, name__in=recorded, status="completed").count()
            == len(recorded)
        ),
        what=f"{recorded} to be recorded",
    )
    first.kill()
    first.wait(10)
    (runners.workdir / "release").touch()
    runners.start()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status in ("completed", "failed"),
        what="the run to finish after the restart",
    )
    return handle.info(), runners.ledger()


def test_kill_mid_join__finished_branch_not_rerun(runners):
    run, ledger = kill_during(runners, "j", "b-block", "join", recorded=("a1",))
    assert run.status == "completed" and run.result == {"quick": "a1", "slow": "released"}
    assert ledger["j a1"] == 1 and ledger["j b-block:start"] == 2


def test_kill_mid_loop__earlier_iterations_not_rerun(runners):
    run, ledger = kill_during(runners, "l", "it-block", "loop")
    assert run.status == "completed" and run.result == 5
    assert [ledger[f"l it{n}"] for n in range(6)] == [1, 1, 1, 1, 1, 1]
    scopes = set(Run.objects.get(id=run.id).entries.values_list("scope", flat=True))
    assert scopes == {"", "/iterate#3", "/iterate#4", "/iterate#5"}  # pruned to history_size


def test_kill_mid_rollback__finished_rollback_not_rerun(runners):
    run, ledger = kill_during(runners, "rb", "reserve", "rollback")
    assert run.status == "failed" and run.error["rollback"] == {"ran": 2, "failed": []}
    assert ledger["rb undo-charge"] == 1  # finished before the kill: never again
    assert ledger["rb reserve:start"] == 2 and ledger["rb undo-reserve"] == 1
    assert ledger["rb reserve"] == 1 and ledger["rb charge"] == 1


def test_kill_mid_race__the_restarted_run_records_one_winner(runners):
    run, ledger = kill_during(runners, "ra", "r-block", "race")
    assert run.status == "completed" and run.result == "work"
    assert ledger["ra r-block:start"] == 2
    race_entry = Run.objects.get(id=run.id).entries.get(name="first")
    assert race_entry.output["winner"] == "work"


def test_kill_after_a_step_broadcast__its_events_are_marked_lost_for_followers(runners):
    handle = registry.client("announce").get_or_create(["an"])
    first = runners.start()
    wait_for(lambda: Event.objects.filter(run_id=handle.run_id).exists(), what="the step's broadcast")
    first.kill()
    first.wait(10)
    (runners.workdir / "release").touch()
    runners.start()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "completed", what="the run to complete")

    events = handle.events()
    assert [(e.name, e.lost) for e in events] == [
        ("progress", True),
        (LOST_EVENTS, False),
        ("progress", False),
    ]
    assert events[1].payload == {"events": [events[0].id], "attempts": [{"step": "publish", "attempt": 1}]}
    # What a follower keeps: one "published", from the attempt that was recorded.
    kept = [e for e in events if not e.lost and e.name != LOST_EVENTS]
    assert [e.payload for e in kept] == [{"stage": "published"}]
