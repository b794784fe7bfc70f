"""workflows.core.repair_rules: which repair applies to a run in which status, and the sentence
that says why not."""

from __future__ import annotations

import pytest

from workflows.core import repair_rules
from workflows.core.exceptions import BadInput, NotApplicable, RunBusy
from workflows.core.records import RunStatus

EXPECTED = {
    "pending": {"replay": True, "retry_now": True, "cancel": True, "pause": True, "resume": False},
    "running": {"replay": False, "retry_now": True, "cancel": True, "pause": True, "resume": False},
    "waiting": {"replay": True, "retry_now": True, "cancel": True, "pause": True, "resume": False},
    "paused": {"replay": True, "retry_now": True, "cancel": True, "pause": False, "resume": True},
    "completed": {"replay": True, "retry_now": False, "cancel": False, "pause": False, "resume": False},
    "failed": {"replay": True, "retry_now": False, "cancel": False, "pause": False, "resume": False},
    "cancelled": {"replay": True, "retry_now": False, "cancel": False, "pause": False, "resume": False},
}


def test_every_status_has_its_table_row():
    assert set(EXPECTED) == {s.value for s in RunStatus}
    for status, row in EXPECTED.items():
        assert repair_rules.offered(status) == row


@pytest.mark.parametrize("status", [s.value for s in RunStatus])
@pytest.mark.parametrize("action", repair_rules.ACTIONS)
def test_a_refusal_is_one_sentence_naming_the_action_and_the_status(action, status):
    refusal = repair_rules.why_not(action, status)
    if EXPECTED[status][action]:
        assert refusal is None
        repair_rules.check(action, "r1", status)  # raises nothing
        return
    assert refusal is not None and refusal.endswith(".") and status in refusal
    assert refusal.split()[0] in ("Replay", "Retry", "Cancel", "Pause", "Resume")
    with pytest.raises(NotApplicable) as refused:
        repair_rules.check(action, "r1", status)
    assert str(refused.value) == refusal
    assert refused.value.detail == {"action": action, "runId": "r1", "status": status}


def test_replay_of_a_running_run_is_run_busy_a_not_applicable():
    with pytest.raises(RunBusy):
        repair_rules.check("replay", "r1", "running")
    assert issubclass(RunBusy, NotApplicable) and issubclass(NotApplicable, BadInput)


def test_retry_now_needs_the_step_waiting_to_retry():
    assert repair_rules.why_not("retry_now", "waiting", step="s", step_status="retrying") is None
    refusal = repair_rules.why_not("retry_now", "waiting", step="s", step_status="completed")
    assert refusal == (
        "Retry now does not apply to step “s”: it is completed, not waiting to retry, so there is nothing to hurry."
    )


def test_an_unknown_action_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown repair 'halt'"):
        repair_rules.why_not("halt", "waiting")
