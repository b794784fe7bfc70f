"""The inspector offers a repair only where it applies (workflows.core.repair_rules), and a direct
POST of one that does not apply answers 409 with the sentence, changing nothing and writing no
audit entry."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.inspector import flows
from tests.inspector.test_admin import entry, failed_approval, retrying_flaky, start, url
from workflows import conf, operations
from workflows.core import repair_rules
from workflows.models import AuditEntry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def cancelled_retrying() -> Run:
    """Cancelled while its step waited to retry: the step's record still says `retrying`."""
    run = retrying_flaky("c1")
    operations.cancel(str(run.id), actor="setup")
    run_until_idle(flows.registry, advance=False)
    AuditEntry.objects.all().delete()
    run.refresh_from_db()
    assert run.status == "cancelled" and entry(run, "call").status == "retrying"
    return run


def running() -> Run:
    handle = start("flaky", "held")
    [claimed] = conf.default_store().claim(
        owner="r1", workflows=["flaky"], limit=1, lease_seconds=60, now=dt.datetime.now(dt.UTC)
    )
    run = Run.objects.get(id=handle.run_id)
    assert claimed.id == str(run.id) and run.status == "running"
    return run


def completed() -> Run:
    flows.FAIL.discard("call")
    handle = start("flaky", "done")
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "completed"
    return run


def links(page: str, run: Run) -> dict[str, bool]:
    return {
        "cancel": url("cancel", run.id) in page,
        "retry": f"{url('cancel', run.id).removesuffix('cancel/')}retry/" in page,
        "replay": f"{url('cancel', run.id).removesuffix('cancel/')}replay/" in page,
    }


def test_buttons__only_the_repairs_that_apply(admin_client):
    cancelled, failed, done = cancelled_retrying(), failed_approval(), completed()
    waiting = retrying_flaky("w1")

    def page(run: Run) -> dict[str, bool]:
        return links(admin_client.get(url("inspect", run.id)).content.decode(), run)

    assert page(waiting) == {"cancel": True, "retry": True, "replay": True}
    assert page(cancelled) == {"cancel": False, "retry": False, "replay": True}
    assert page(failed) == {"cancel": False, "retry": False, "replay": True}
    assert page(done) == {"cancel": False, "retry": False, "replay": True}


def test_buttons__no_replay_of_a_running_run(admin_client):
    held = running()
    assert links(admin_client.get(url("inspect", held.id)).content.decode(), held) == {
        "cancel": True,
        "retry": False,
        "replay": False,
    }


@pytest.mark.parametrize(
    ("make", "action", "status"),
    [
        (cancelled_retrying, "retry", "cancelled"),
        (failed_approval, "cancel", "failed"),
        (completed, "cancel", "completed"),
    ],
)
def test_direct_post__409_with_the_sentence_and_no_audit_entry(admin_client, make, action, status):
    run = make()
    row = Run.objects.values().get(id=run.id)
    target = url("cancel", run.id) if action == "cancel" else url("retry", run.id, entry(run, "call").id)

    response = admin_client.post(target, {"why": "try it anyway"})

    assert response.status_code == 409
    rule = repair_rules.RETRY_NOW if action == "retry" else repair_rules.CANCEL
    sentence = repair_rules.why_not(rule, status)
    assert sentence and sentence in response.content.decode()
    assert 'data-confirm="' not in response.content.decode()  # no button to confirm
    assert not AuditEntry.objects.exists()
    assert Run.objects.values().get(id=run.id) == row


def test_direct_post__replay_of_a_running_run_is_409(admin_client):
    held = failed_approval()  # replayed from `publish`, then claimed by a runner: held now
    operations.replay_from(str(held.id), entry(held, "publish").id, actor="setup")
    AuditEntry.objects.all().delete()
    conf.default_store().claim(
        owner="r2", workflows=["approval"], limit=1, lease_seconds=60, now=dt.datetime.now(dt.UTC)
    )
    assert Run.objects.get(id=held.id).status == "running"
    prepare = entry(held, "prepare")
    page = admin_client.get(url("replay", held.id, prepare.id))
    assert page.status_code == 200 and 'data-confirm="replay"' not in page.content.decode()

    response = admin_client.post(url("replay", held.id, prepare.id), {"why": "now"})

    assert response.status_code == 409
    assert repair_rules.why_not("replay", "running") in response.content.decode()
    assert not AuditEntry.objects.exists()
    assert entry(held, "prepare").id == prepare.id  # nothing superseded
