"""The dashboard's runners (live ones with what they hold and serve) and the runs no live runner
knows: counted on the dashboard, a banner on their page in the inspector (the dashboard's run URL leads there)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from tests.inspector import flows
from tests.support import now
from workflows import conf
from workflows.core.new_run import NewRun
from workflows.core.records import RunnerRecord
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def announce(
    owner: str,
    *,
    workflows: dict[str, list[str]],
    seen_ago: float = 1.0,
    pid: int = 4242,
    clock_offset: float | None = None,
) -> None:
    conf.default_store().register_runner(
        RunnerRecord(
            owner=owner, host="box-1", pid=pid, started_at=now() - dt.timedelta(hours=1),
            last_seen=now() - dt.timedelta(seconds=seen_ago), lease_seconds=30.0, concurrency=4,
            workflows=workflows, clock_offset=clock_offset,
        )
    )  # fmt: skip


def orphan_run():
    """A run of a workflow no registry of this server (and no runner) knows."""
    run, _ = conf.default_store().get_or_create_run(
        NewRun(workflow="orphan", key=["o1"], version="", initial_state={}, now=now())
    )
    return run


def banner(client, run_id) -> tuple[str | None, str | None]:
    pages = (reverse("admin:workflows_run_inspect", args=[run_id]), reverse("inspector:run", args=[run_id]))
    found = []
    for url in pages:
        response = client.get(url, follow=True)  # the dashboard's run URL: the admin's page
        assert response.status_code == 200
        found.append(response.context["run_banner"])
        assert (b"data-runner-banner" in response.content) == (response.context["run_banner"] is not None)
    return found[0], found[1]


def test_dashboard__lists_runners_with_host_pid_runs_held_and_workflows(admin_client):
    announce("box-1:4242:aaaa", workflows={"approval": ["v2", "v1"], "flaky": ["v1"]})
    announce("box-1:99:dead", workflows={"approval": ["v1"]}, seen_ago=3600, pid=99)
    flows.registry.client("approval").get_or_create(["held"])
    conf.default_store().claim(
        owner="box-1:4242:aaaa", workflows=["approval"], limit=1, lease_seconds=30, now=now()
    )
    response = admin_client.get("/dashboard/")
    rows = response.context["runners"]
    assert [(r.owner, r.alive, r.runs_held) for r in rows] == [
        ("box-1:4242:aaaa", True, 1),
        ("box-1:99:dead", False, 0),
    ]
    assert rows[0].workflows == ["approval (v2, v1)", "flaky (v1)"]
    page = response.content.decode()
    assert (
        'data-runner="box-1:4242:aaaa" data-alive="1"' in page
        and 'data-runner="box-1:99:dead" data-alive="0"' in page
    )
    assert "1 / 4" in page and "not responding" in page and "data-no-runner" not in page
    fragment = admin_client.get(reverse("inspector:stats")).content.decode()
    assert 'data-runner="box-1:4242:aaaa"' in fragment  # refreshed with the figures


def test_a_run_no_live_runner_knows__counted_and_bannered(admin_client):
    announce("box-1:4242:aaaa", workflows={"approval": ["v1"]})
    served = flows.registry.client("approval").get_or_create(["fine"])
    orphan = orphan_run()
    response = admin_client.get("/dashboard/")
    assert response.context["unserved"] == {"orphan": 1}
    assert 'data-unserved="1"' in response.content.decode()
    inspect, live = banner(admin_client, orphan.id)
    assert inspect == live and "No live runner knows the workflow “orphan”" in inspect
    assert banner(admin_client, served.run_id) == (None, None)


def test_no_runner_alive__said_on_the_dashboard_and_on_every_live_run(admin_client):
    announce("box-1:99:dead", workflows={"approval": ["v1"]}, seen_ago=3600, pid=99)
    handle = flows.registry.client("approval").get_or_create(["stuck"])
    response = admin_client.get("/dashboard/")
    assert b"data-no-runner" in response.content
    assert response.context["unserved"] == {"approval": 1}
    inspect, _live = banner(admin_client, handle.run_id)
    assert inspect.startswith("No runner is alive; the last one was seen ")


def test_a_finished_run_gets_no_banner(admin_client):
    handle = flows.registry.client("flaky").get_or_create(["done"])
    run_until_idle(flows.registry)
    assert handle.info().status == "completed"
    assert banner(admin_client, handle.run_id) == (None, None)


def test_dashboard__shows_each_runners_host_clock_offset_and_flags_one_off(admin_client):
    announce("box-1:1:fast", workflows={"approval": ["v1"]}, clock_offset=-120.44, pid=1)
    announce("box-1:2:good", workflows={"approval": ["v1"]}, clock_offset=0.004, pid=2)
    announce("box-1:3:older", workflows={"approval": ["v1"]}, pid=3)  # a runner that never measured it
    page = admin_client.get("/dashboard/").content.decode()
    rows = {row.split('"')[0]: row for row in page.split('data-runner="')[1:]}
    assert 'data-clock-offset="-120.440"' in rows["box-1:1:fast"] and "-120.4 s" in rows["box-1:1:fast"]
    assert 'wf-badge wf-lost" title="off the database' in rows["box-1:1:fast"]
    assert 'data-clock-offset="0.004"' in rows["box-1:2:good"] and "0.0 s" in rows["box-1:2:good"]
    assert "off the database" not in rows["box-1:2:good"]
    assert 'data-clock-offset=""' in rows["box-1:3:older"]
