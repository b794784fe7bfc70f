"""The dashboard's bulk pages over Django's test client: the dry run, the confirmation naming the
count, the start, the operation's page and its abort, and who may do what."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.inspector.test_admin import staff, waiting_approval
from workflows.bulk import executor
from workflows.models import AuditEntry, BulkOperation, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


FILTER = {"action": "cancel", "workflow": "approval", "status": ["waiting"]}


def test_preview__names_the_count_and_lists_a_sample_and_changes_nothing(admin_client):
    runs = [waiting_approval(f"a{i}") for i in range(2)]

    page = admin_client.get(reverse("inspector:bulk"), FILTER).content.decode()

    assert 'data-count="2"' in page and "Cancel 2 runs" in page
    assert all(str(r.id)[:8] in page for r in runs)
    assert BulkOperation.objects.count() == 0


def test_start__then_the_operation_page_shows_progress_and_the_dashboard_lists_it(admin_client):
    waiting_approval()
    response = admin_client.post(
        reverse("inspector:bulk"), {**FILTER, "why": "clean up", "expected_count": "1"}
    )

    op = BulkOperation.objects.get()
    assert response.status_code == 302 and response.url == reverse("inspector:bulk_operation", args=[op.id])
    assert (op.actor, op.reason, op.expected_count, op.total) == ("root", "clean up", 1, 1)
    assert "data-bulk-abort" in admin_client.get(response.url).content.decode()
    executor.execute(executor.claim("test").id, "test")
    fragment = admin_client.get(reverse("inspector:bulk_progress", args=[op.id])).content.decode()
    assert 'data-status="done"' in fragment and "data-bulk-abort" not in fragment
    assert f'data-bulk-op="{op.id}"' in admin_client.get(reverse("inspector:dashboard")).content.decode()
    assert AuditEntry.objects.get().details == {"bulk_operation": op.id}


def test_abort__stops_a_pending_operation_and_a_second_abort_is_409(admin_client):
    waiting_approval()
    admin_client.post(reverse("inspector:bulk"), {**FILTER, "why": "r"})
    op = BulkOperation.objects.get()

    assert admin_client.post(reverse("inspector:bulk_abort", args=[op.id])).status_code == 302
    assert BulkOperation.objects.get().status == "aborted"
    assert admin_client.post(reverse("inspector:bulk_abort", args=[op.id])).status_code == 409


def test_zero_matches_and_bad_input(admin_client):
    waiting_approval()
    page = admin_client.get(reverse("inspector:bulk"), {**FILTER, "workflow": "nope"}).content.decode()
    assert "data-bulk-zero" in page and "0 runs" in page
    response = admin_client.post(reverse("inspector:bulk"), {**FILTER, "workflow": "nope", "why": "r"})
    assert response.status_code == 409
    assert admin_client.get(reverse("inspector:bulk"), {"action": "cancel"}).status_code == 422  # no filter
    assert (
        admin_client.get(reverse("inspector:bulk"), {"action": "explode", "workflow": "x"}).status_code == 422
    )
    assert BulkOperation.objects.count() == 0


def test_starting_needs_the_single_action_s_permission(client):
    run = waiting_approval()
    client.force_login(staff("viewer"))
    page = client.get(reverse("inspector:bulk"), FILTER).content.decode()
    assert "data-bulk-not-allowed" in page  # may preview
    assert client.post(reverse("inspector:bulk"), {**FILTER, "why": "r"}).status_code == 403
    assert BulkOperation.objects.count() == 0 and not Run.objects.get(id=run.id).cancel_requested

    client.force_login(staff("canceller", "cancel_run"))
    assert client.post(reverse("inspector:bulk"), {**FILTER, "why": "r"}).status_code == 302


def test_bulk_pause_needs_the_pause_permission_and_pauses_each_run(client):
    run = waiting_approval()
    pause = {"action": "pause", "workflow": "approval", "status": ["waiting"]}
    client.force_login(staff("canceller", "cancel_run"))
    assert client.post(reverse("inspector:bulk"), {**pause, "why": "hold"}).status_code == 403
    assert BulkOperation.objects.count() == 0

    client.force_login(staff("pauser", "pause_run"))
    assert client.post(reverse("inspector:bulk"), {**pause, "why": "hold"}).status_code == 302
    op = BulkOperation.objects.get()
    executor.execute(executor.claim("test", op_id=op.id).id, "test")
    assert Run.objects.get(id=run.id).status == "paused"
    assert AuditEntry.objects.get(run_id=run.id, action="pause").actor.endswith("pauser")
