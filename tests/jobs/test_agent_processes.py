"""The accountAgent example with real processes: a `runworkflows` runner SIGKILLed between two
model turns of the agent, against `demoservices`; the restarted runner repeats no completed turn's
model call or tool call (the demo services count every call). On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from jobs.agent_workflow import registry
from jobs.processes import wait_until
from workflows.models import Entry, Run

from .test_agent_workflow import QUESTION
from .test_processes import DEADLINE, demo, start_runner

__all__ = ["demo", "start_runner"]  # the fixtures, shared with the aiJob's process tests

pytestmark = pytest.mark.django_db(transaction=True)

TURN_1 = ("account:turn-1:model", "account:turn-1:tool:crm_lookup[0]")


def completed(run_id: str) -> set[str]:
    return set(Entry.objects.filter(run_id=run_id, status="completed").values_list("name", flat=True))


def test_runner_killed_between_model_turns__no_completed_turn_is_called_again(demo, start_runner):
    demo.script("agent", "ok", "hang:120")  # turn 1 answers; turn 2's model call hangs until the kill
    first = start_runner()
    handle = registry.client("accountAgent").get_or_create(["kill-1"])
    handle.send("question", {"question": QUESTION})
    wait_until(
        lambda: demo.counts().get("agent") == 2, timeout=DEADLINE, what="turn 2's model call", child=first
    )
    wait_until(
        lambda: set(TURN_1) <= completed(handle.run_id), timeout=DEADLINE, what="turn 1 recorded", child=first
    )

    wait_until(
        lambda: Entry.objects.filter(run_id=handle.run_id, name="account:turn-2:model", status="running").exists(),
        timeout=DEADLINE, what="turn 2 shown running", child=first,
    )  # fmt: skip

    first.kill()  # SIGKILL: turn 1 (model and CRM lookup) is recorded, turn 2's model call in flight
    assert completed(handle.run_id) == {"wait-question", *TURN_1}
    assert demo.counts() == {"agent": 2, "crm": 1}

    second = start_runner()
    wait_until(
        lambda: (Run.objects.get(id=handle.run_id).state or {}).get("pending_tool_call") is not None,
        timeout=DEADLINE, what="publish_note to await approval", child=second,
    )  # fmt: skip
    # Only turn 2's model call, cut off by the kill, was made again: turn 1's came from the record.
    assert demo.counts() == {"agent": 3, "crm": 1}

    handle.send("tool-approval", {"decision": "approve", "by": "ops"})
    wait_until(
        lambda: Run.objects.get(id=handle.run_id).status in ("completed", "failed"),
        timeout=DEADLINE, what="the run to finish", child=second,
    )  # fmt: skip
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "completed", run.error
    assert demo.counts() == {"agent": 4, "crm": 1, "cms": 1}
    assert len(demo.posts()) == 1
    outcomes = {
        name: [a.outcome for a in Entry.objects.get(run=run, name=name, superseded=False).attempt_history()]
        for name in (*TURN_1, "account:turn-2:model", "account:turn-3:model")
    }
    assert outcomes == {
        "account:turn-1:model": ["ok"],
        "account:turn-1:tool:crm_lookup[0]": ["ok"],
        "account:turn-2:model": ["lost", "ok"],  # the attempt the kill cut off is on record
        "account:turn-3:model": ["ok"],
    }
