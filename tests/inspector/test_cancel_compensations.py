"""The cancel confirmation tells the truth about compensations: a dry replay of the run's history
finds the rollbacks of its completed steps, and the page lists them in the order a cancel runs
them; cancelling then runs exactly those."""

from __future__ import annotations

import html
import re

import pytest

from tests.inspector import flows
from tests.inspector.test_admin import start, url, waiting_approval
from workflows.models import Entry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def words(response) -> str:
    text = re.sub(r"<[^>]+>", " ", response.content.decode())
    return " ".join(html.unescape(text).split())


@pytest.fixture(autouse=True)
def _undone():
    flows.UNDONE.clear()
    yield
    flows.UNDONE.clear()


def booked() -> Run:
    handle = start("booking", "b1")
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def test_the_page_lists_the_rollbacks_a_cancel_runs_newest_first(admin_client):
    run = booked()
    response = admin_client.get(url("cancel", run.id))
    assert response.status_code == 200
    page = response.content.decode()
    assert re.findall(r'data-compensation="([^"]+)"', page) == ["charge-card", "reserve-seat"]
    text = words(response)
    assert "Compensations that run on cancel" in text
    assert (
        "run on cancel, each once: the rollback of “charge-card”, then the rollback of “reserve-seat”" in text
    )
    assert "no rollback runs on cancel" not in text
    assert flows.UNDONE == []  # the dry replay ran no rollback (and no step)


def test_cancelling_runs_exactly_those(admin_client):
    run = booked()
    response = admin_client.post(url("cancel", run.id), {"why": "customer left"})
    assert response.status_code == 302
    run_until_idle(flows.registry)

    assert Run.objects.get(id=run.id).status == "cancelled"
    assert flows.UNDONE == ["charge-card", "reserve-seat"]
    ran = Entry.objects.filter(run=run, scope="~rollback").order_by("position").values_list("name", flat=True)
    assert list(ran) == ["charge-card", "reserve-seat"]


def test_a_run_without_rollbacks_says_nothing_is_undone(admin_client):
    run = waiting_approval()
    text = words(admin_client.get(url("cancel", run.id)))
    assert "no completed step has a rollback to run" in text
    assert "Compensations that run on cancel" not in text
