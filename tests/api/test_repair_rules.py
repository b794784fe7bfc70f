"""Repairs only where they apply (workflows.core.repair_rules): replay of a running run, retry now
of a completed, failed or cancelled one, cancel of a finished one are refused over the API (409
`not_applicable`, the sentence as message) and by the command (exit status 1, the sentence on
stderr), changing nothing and writing no audit entry."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.api import flows
from tests.api.helpers import assert_error, counts
from workflows import conf
from workflows.core import repair_rules
from workflows.core.records import Audit
from workflows.engine.runner import Runner
from workflows.models import AuditEntry, Entry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

SETUP = Audit(actor="setup", reason="setup")
NOT_APPLICABLE = [
    ("replay", "running"),
    ("retry_now", "completed"),
    ("retry_now", "failed"),
    ("retry_now", "cancelled"),
    ("cancel", "completed"),
    ("cancel", "failed"),
    ("cancel", "cancelled"),
]


def start(api, workflow: str = "flaky") -> str:
    response = api.post(f"/api/workflows/{workflow}/runs", {"key": ["k"]})
    assert response.status_code == 201, response.content
    return response.json()["id"]


def run_in(api, registry, status: str) -> tuple[str, int]:
    """A run in `status`, and the id of one of its current entries."""
    if status == "cancelled":
        run_id = start(api, "approval")
        run_until_idle(registry)
        assert api.post(f"/api/runs/{run_id}/cancel", {"reason": "setup"}).status_code == 200
        run_until_idle(registry)
        AuditEntry.objects.all().delete()
    else:
        flows.FAILURES.update(check=1 if status in ("failed", "running") else 0)
        run_id = start(api)
        run_until_idle(registry)
    if status == "running":  # replayed, then claimed by a runner: held right now
        check = Entry.objects.get(run_id=run_id, name="check", superseded=False)
        conf.default_store().replay(run_id, check.id, audit=SETUP, now=dt.datetime.now(dt.UTC))
        AuditEntry.objects.all().delete()
        claimed = conf.default_store().claim(
            owner="r1", workflows=["flaky"], limit=1, lease_seconds=60, now=dt.datetime.now(dt.UTC)
        )
        assert [c.id for c in claimed] == [run_id]
    assert Run.objects.get(id=run_id).status == status
    entry = Entry.objects.filter(run_id=run_id, superseded=False).order_by("id").first()
    assert entry is not None
    return run_id, entry.id


def api_call(api, action: str, run_id: str, entry_id: int):
    if action == "replay":
        return api.post(f"/api/runs/{run_id}/replay", {"entry_id": entry_id, "reason": "r"})
    if action == "retry_now":
        return api.post(f"/api/runs/{run_id}/entries/{entry_id}/retry-now", {"reason": "r"})
    return api.post(f"/api/runs/{run_id}/cancel", {"reason": "r"})


def cli(action: str, run_id: str, entry_id: int) -> tuple[int, str]:
    """`manage.py workflows …`: its exit status (Django's `run_from_argv` exits with a
    CommandError's `returncode`, printing its message to stderr) and that message."""
    sub = {"replay": "replay", "retry_now": "retry-now", "cancel": "cancel"}[action]
    args = [sub, run_id, "--reason", "r"]
    if action != "cancel":
        args += ["--entry", str(entry_id)]
    with pytest.raises(CommandError) as refused:
        call_command("workflows", *args, stdout=io.StringIO())
    return refused.value.returncode, str(refused.value)


@pytest.mark.parametrize(("action", "status"), NOT_APPLICABLE)
def test_api__a_repair_that_does_not_apply_is_409_and_changes_nothing(api, registry, action, status):
    run_id, entry_id = run_in(api, registry, status)
    before, row = counts(), Run.objects.values().get(id=run_id)

    error = assert_error(api_call(api, action, run_id, entry_id), 409, "not_applicable")

    assert error["message"] == repair_rules.why_not(action, status)
    assert error["detail"] == {"action": action, "runId": run_id, "status": status}
    assert counts() == before and not AuditEntry.objects.exists()
    assert Run.objects.values().get(id=run_id) == row


@pytest.mark.parametrize(("action", "status"), NOT_APPLICABLE)
def test_cli__a_repair_that_does_not_apply_exits_1_with_the_sentence(api, registry, action, status):
    run_id, entry_id = run_in(api, registry, status)
    before = counts()

    code, stderr = cli(action, run_id, entry_id)

    assert code == 1
    assert stderr == repair_rules.why_not(action, status)
    assert counts() == before and not AuditEntry.objects.exists()


def test_api__retry_now_of_a_step_not_waiting_to_retry_is_409(api, registry):
    flows.FAILURES.update(fetch=1)
    run_id = start(api)
    async_to_sync(Runner(registry=registry, store=conf.default_store(), watch=False).run_due)()
    assert Run.objects.get(id=run_id).status == "waiting"  # fetch waits out its backoff
    Entry.objects.filter(run_id=run_id, name="fetch").update(status="completed")
    fetch = Entry.objects.get(run_id=run_id, name="fetch")
    before = counts()

    error = assert_error(api_call(api, "retry_now", run_id, fetch.id), 409, "not_applicable")

    assert "“fetch”: it is completed, not waiting to retry" in error["message"]
    assert counts() == before


@pytest.mark.parametrize(
    ("action", "status"),
    [("replay", "failed"), ("replay", "completed"), ("replay", "cancelled"), ("cancel", "running")],
)
def test_api__a_repair_that_applies_is_accepted_and_audited(api, registry, action, status):
    run_id, entry_id = run_in(api, registry, status)
    response = api_call(api, action, run_id, entry_id)
    assert response.status_code == 200, response.content
    assert AuditEntry.objects.get().action == action
