"""Reads off a real streaming replica: a private primary (tests/pgcluster.py), its standby made by
`pg_basebackup -R` (tests/pgreplica.py), and daphne started with DATABASE_URL on the primary and
READ_DATABASE_URL on the standby, as in production.

The dashboard, the admin's run list and `GET /api/runs` read the standby and say how far behind it
is; with its replay paused a new run is missing from them and they say the data is behind, while
the run's own reads and actions (the primary's) see it at once; after resuming it is listed. A
standby that is down leaves every list on the primary, with a note, never a 500.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from jobs.processes import Child
from tests import pgcluster
from tests.pgreplica import Standby
from tests.support import free_port, manage, wait_serving

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "replica-test-password"
MAKE_USERS = (
    "from django.contrib.auth.models import User; from workflows.http.auth import create_api_key;"
    f" User.objects.create_superuser('admin', 'a@example.com', {PASSWORD!r});"
    " print(create_api_key('lists')[1])"
)

pytestmark = [
    # The test process needs no database itself, but the suite's session fixtures expect the test
    # database to exist (pytest-django creates it only for a session that asks for it).
    pytest.mark.django_db,
    pgcluster.needed_for("a private primary and standby"),
]


@dataclass
class Bed:
    primary: pgcluster.PrivateCluster
    standby: Standby
    web: httpx2.Client  # logged in to the admin
    api: httpx2.Client  # with an API key


def _env(primary: pgcluster.PrivateCluster, standby: Standby | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "READ_DATABASE_URL")}
    env.update(
        {
            "DATABASE_URL": primary.url(),
            "DATABASE_POOL": "1",
            "DATABASE_POOL_MIN_SIZE": "1",
            "DATABASE_POOL_MAX_SIZE": "4",
            "DATABASE_POOL_TIMEOUT": "2",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if standby is not None:
        env["READ_DATABASE_URL"] = standby.url()
    return env


def _manage(primary: pgcluster.PrivateCluster, *args: str) -> str:
    return manage(_env(primary), *args)


def _login(base: str) -> httpx2.Client:
    web = httpx2.Client(base_url=base, timeout=30)
    web.get("/admin/login/")
    answer = web.post(
        "/admin/login/?next=/admin/",
        data={
            "username": "admin",
            "password": PASSWORD,
            "csrfmiddlewaretoken": web.cookies["csrftoken"],
            "next": "/admin/",
        },
        headers={"Referer": f"{base}/admin/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return web


@pytest.fixture(scope="module")
def bed(tmp_path_factory) -> Iterator[Bed]:
    primary = pgcluster.PrivateCluster().start()
    standby = Standby(primary)
    child = None
    try:
        _manage(primary, "migrate", "--verbosity", "0")
        key = _manage(primary, "shell", "-c", MAKE_USERS).strip().splitlines()[-1]  # one start-up for both
        standby.start()
        port = free_port()
        child = Child(
            "daphne",
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
            env=_env(primary, standby),
            log=tmp_path_factory.mktemp("replica") / "daphne.log",
        )
        base = f"http://127.0.0.1:{port}"
        wait_serving(f"{base}/api/openapi.json", child.running, child.output, 120, "daphne")
        web = _login(base)
        api = httpx2.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"})
        try:
            yield Bed(primary, standby, web, api)
        finally:
            web.close()
            api.close()
    finally:
        if child is not None:
            child.stop()
        standby.destroy()
        primary.destroy()


def _start(bed: Bed, key: str) -> str:
    answer = bed.api.post("/api/workflows/aiJob/runs", json={"key": [key]})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _listed(bed: Bed) -> tuple[list[str], httpx2.Headers]:
    answer = bed.api.get("/api/runs")
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == {"items", "next_cursor"}  # the body's shape is a contract
    return [item["id"] for item in answer.json()["items"]], answer.headers


def _note(html: str) -> str:
    found = re.search(r'<p class="wf-data-age[^"]*"[^>]*>([^<]*)</p>', html)
    assert found, html[:2000]
    return found.group(1)


def _pages(bed: Bed) -> dict[str, str]:
    pages = {}
    for path in ("/dashboard/", "/dashboard/stats/", "/admin/workflows/run/", "/admin/workflows/auditentry/"):
        answer = bed.web.get(path)
        assert answer.status_code == 200, (path, answer.text[:1000])
        pages[path] = answer.text
    return pages


def test_lists_read_the_replica_and_say_it_is_up_to_date(bed):
    run_id = _start(bed, "replicated")
    bed.standby.wait_caught_up()
    ids, headers = _listed(bed)
    assert run_id in ids
    assert (headers["X-Data-Source"], headers["X-Data-Age"]) == ("replica", "0")
    pages = _pages(bed)
    for path, html in pages.items():
        assert _note(html) == "Read from a replica, up to date.", path
    assert f'data-run="{run_id}"' in pages["/dashboard/"]
    assert run_id in pages["/admin/workflows/run/"]


def test_with_replay_paused_a_new_run_is_missing_from_the_lists_which_say_they_are_behind(bed):
    bed.standby.pause()
    try:
        run_id = _start(bed, "written-while-paused")
        # What a run's correctness depends on reads the primary: the run, and an action on it.
        assert bed.api.get(f"/api/runs/{run_id}").json()["id"] == run_id
        action = bed.api.post(f"/api/runs/{run_id}/actions/status")
        assert action.status_code == 200 and action.json()["result"]["status"] == "pending"
        bed.standby.wait_received()

        ids, headers = _listed(bed)
        assert run_id not in ids
        assert headers["X-Data-Source"] == "replica; replay-paused"
        assert float(headers["X-Data-Age"]) > 0
        pages = _pages(bed)
        for path, html in pages.items():
            assert re.fullmatch(r"Read from a replica whose replay is paused, .+ behind\.", _note(html)), path
            assert 'data-behind="1"' in html, path
        assert run_id not in pages["/dashboard/"]
        assert run_id not in pages["/admin/workflows/run/"]
        # A run's page is no list: it reads the primary.
        page = bed.web.get(f"/admin/workflows/run/{run_id}/inspect/")
        assert page.status_code == 200 and run_id in page.text and "wf-data-age" not in page.text
    finally:
        bed.standby.resume()

    bed.standby.wait_caught_up()
    ids, headers = _listed(bed)
    assert run_id in ids
    assert (headers["X-Data-Source"], headers["X-Data-Age"]) == ("replica", "0")
    pages = _pages(bed)
    assert f'data-run="{run_id}"' in pages["/dashboard/"]
    assert run_id in pages["/admin/workflows/run/"]
    assert _note(pages["/dashboard/"]) == "Read from a replica, up to date."


def test_with_the_replica_down_the_lists_read_the_primary_and_say_so(bed):
    run_id = _start(bed, "replica-down")
    bed.standby.stop()
    ids, headers = _listed(bed)
    assert run_id in ids
    assert headers["X-Data-Source"] == "primary; replica-unavailable"
    pages = _pages(bed)
    for path, html in pages.items():
        assert _note(html).startswith("Replica unavailable ("), path
        assert _note(html).endswith("): read from the primary."), path
    assert f'data-run="{run_id}"' in pages["/dashboard/"]
    assert run_id in pages["/admin/workflows/run/"]
