"""Concurrency groups in the inspector: a run held back by its full group says so on its page
(with its priority and group), and the dashboard lists each group's use next to the limiters."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from tests.inspector import group_flows
from workflows import conf
from workflows.models import Run
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.inspector.group_flows.registry"]}
    conf.registry.cache_clear()
    yield group_flows.registry
    conf.registry.cache_clear()


def _start_and_claim() -> Run:
    """Three runs of customer acme and one of beta; a runner takes what the groups allow."""
    client = group_flows.registry.client("slot", store=DjangoStore())
    for key, priority in ((["acme", "1"], 0), (["acme", "2"], 0), (["acme", "3"], 7), (["beta", "1"], 0)):
        client.get_or_create(key, priority=priority)
    DjangoStore().claim(
        owner="runner-1", workflows=["slot"], limit=2, lease_seconds=60, now=dt.datetime.now(dt.UTC),
        concurrency=group_flows.registry.concurrency_caps(),
    )  # fmt: skip
    DjangoStore().claim(
        owner="runner-2", workflows=["slot"], limit=5, lease_seconds=60, now=dt.datetime.now(dt.UTC),
        concurrency=group_flows.registry.concurrency_caps(),
    )  # fmt: skip
    return Run.objects.get(workflow="slot", status="pending")


def test_run_page__a_run_held_back_by_its_full_group_says_so(admin_client):
    waiting = _start_and_claim()
    assert waiting.key == ["acme", "2"]  # acme/3 had the higher priority, acme/1 came first
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[waiting.id])).content.decode()
    assert "Waiting for a slot in group slot/acme (2/2 running)" in page
    assert "data-run-group>slot/acme<" in page

    running = Run.objects.get(key=["acme", "3"])
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[running.id])).content.decode()
    assert "data-slot-wait" not in page and "data-run-priority" in page


def test_run_page__no_slot_line_once_a_slot_is_free(admin_client):
    waiting = _start_and_claim()
    Run.objects.filter(key=["acme", "1"]).update(status="completed", wake_at=None, lease_owner="")
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[waiting.id])).content.decode()
    assert "data-slot-wait" not in page


def test_dashboard__lists_each_groups_running_max_and_waiting(admin_client):
    _start_and_claim()
    dashboard = admin_client.get(reverse("inspector:dashboard")).content.decode()
    rows = {}
    for group in ("slot/acme", "slot/beta"):
        row = dashboard[dashboard.index(f'data-group="{group}"') :].split("</tr>")[0]
        rows[group] = [c.split(">", 1)[1].split("<")[0] for c in row.split("<td")[1:]]
    assert rows == {"slot/acme": ["slot/acme", "2 / 2", "1"], "slot/beta": ["slot/beta", "1 / 2", "0"]}
    assert dashboard.index('id="wf-groups"') > 0
