"""WORKFLOWS["READ_DATABASE"] in one process, on whatever database the suite runs on: the lists
read the alias it names and say so; a replica that cannot be reached, before or in the middle of a
page, leaves the page and `GET /api/runs` answering from the primary with a note, never a 500.
A real streaming replica, its lag and a paused replay: tests/acceptance/test_read_replica.py.
"""

from __future__ import annotations

import contextlib
import copy

import pytest
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.urls import reverse

from tests.inspector import flows
from tests.support import free_port
from workflows import operations
from workflows.http.auth import create_api_key
from workflows.models import Run
from workflows.reads import source as read_source
from workflows.reads.source import ReadSource

# Data a second connection must see: committed, not held in a test's transaction.
committed = pytest.mark.django_db(transaction=True)
# ... and read through the alias "reads", which a test must declare (Django refuses queries to an
# alias a test did not); a mirror of the default database, it gets no test database of its own.
through_reads = pytest.mark.django_db(transaction=True, databases=["default", "reads"])

PAGES = [
    "inspector:dashboard",
    "inspector:stats",
    "admin:workflows_run_changelist",
    "admin:workflows_auditentry_changelist",
]


@pytest.fixture(scope="module")
def reads_alias():
    """The alias "reads": the test database through a connection of its own, set up before the
    test cases that declare it (Django checks a declared alias exists)."""
    base = copy.deepcopy(connections[DEFAULT_DB_ALIAS].settings_dict)
    base.get("OPTIONS", {}).pop("pool", None)
    base["TEST"] = {**base.get("TEST", {}), "MIRROR": DEFAULT_DB_ALIAS}
    connections.settings["reads"] = connections.configure_settings({DEFAULT_DB_ALIAS: base, "reads": base})[
        "reads"
    ]
    yield
    _forget_connection("reads")
    del connections.settings["reads"]


def _forget_connection(alias: str) -> None:
    """Close the alias's connection and drop its wrapper: the next use makes one anew from its
    settings (another backend, if its ENGINE changed)."""
    connections[alias].close()
    with contextlib.suppress(AttributeError):  # no connection was made in this context
        del connections[alias]


@pytest.fixture
def read_from(settings, reads_alias):
    """`read_from(**changes)`: READ_DATABASE is "reads", its settings changed so for the test."""
    given = connections.settings["reads"]
    kept = copy.deepcopy(given)

    def configure(**changes) -> None:
        _forget_connection("reads")
        given.update(changes)
        settings.WORKFLOWS = {**settings.WORKFLOWS, "READ_DATABASE": "reads"}

    read_source.forget_failures()
    yield configure
    read_source.forget_failures()
    _forget_connection("reads")
    given.clear()
    given.update(kept)


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.fixture
def api_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {create_api_key('lists')[1]}"}


def _run(key: str) -> Run:
    handle = flows.registry.client("booking").get_or_create([key])
    run = Run.objects.get(id=handle.run_id)
    operations.cancel(str(run.id), actor="test", reason="an audit entry for the audit list")
    return run


def _dead_postgres() -> dict:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),  # nothing listens there: the connection is refused at once
        "NAME": "nowhere",
        "USER": "nobody",
        "OPTIONS": {"connect_timeout": 2},
    }


@committed
def test_without_a_read_database_pages_show_no_note_and_the_api_says_primary(admin_client, api_headers):
    run = _run("plain")
    for name in PAGES:
        response = admin_client.get(reverse(name))
        assert response.status_code == 200, name
        assert b"data-read-source" not in response.content, name
    response = admin_client.get("/api/runs", headers=api_headers)
    assert response.status_code == 200
    assert (response["X-Data-Source"], response["X-Data-Age"]) == ("primary", "0")
    assert set(response.json()) == {"items", "next_cursor"}
    assert [item["id"] for item in response.json()["items"]] == [str(run.id)]


@through_reads
def test_a_read_database_that_answers_is_read_and_named_on_every_list(admin_client, api_headers, read_from):
    read_from()  # the same database through another connection (a "replica" that is never behind)
    run = _run("mirrored")
    for name in PAGES:
        response = admin_client.get(reverse(name))
        assert response.status_code == 200, name
        assert b'data-read-source="replica"' in response.content, name
        assert b"Replica unavailable" not in response.content, name
    assert str(run.id).encode() in admin_client.get(reverse("inspector:dashboard")).content
    assert str(run.id).encode() in admin_client.get(reverse("admin:workflows_run_changelist")).content
    response = admin_client.get("/api/runs", headers=api_headers)
    assert response["X-Data-Source"] == "replica"
    assert [item["id"] for item in response.json()["items"]] == [str(run.id)]
    if connections[DEFAULT_DB_ALIAS].vendor == "postgresql":  # not a standby: nothing to catch up
        assert response["X-Data-Age"] == "0"
        assert b"Read from a replica, up to date." in admin_client.get(reverse("inspector:dashboard")).content
    # A run's page is not a list: it reads the primary, with no note.
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[run.id]))
    assert page.status_code == 200 and b"data-read-source" not in page.content


@through_reads
def test_an_unreachable_read_database_leaves_every_list_on_the_primary_with_a_note(
    admin_client, api_headers, read_from
):
    read_from(**_dead_postgres())
    run = _run("fallback")
    for name in PAGES:
        response = admin_client.get(reverse(name))
        assert response.status_code == 200, name
        assert b"Replica unavailable (cannot read it): read from the primary." in response.content, name
        assert b'data-read-source="primary"' in response.content, name
    assert str(run.id).encode() in admin_client.get(reverse("admin:workflows_run_changelist")).content
    response = admin_client.get("/api/runs", headers=api_headers)
    assert response.status_code == 200
    assert response["X-Data-Source"] == "primary; replica-unavailable"
    assert response["X-Data-Age"] == "0"
    assert [item["id"] for item in response.json()["items"]] == [str(run.id)]


@through_reads
def test_a_replica_that_fails_in_the_middle_of_a_list_is_read_again_from_the_primary(
    admin_client, api_headers, read_from, monkeypatch
):
    """The source was measured (it answered), then the replica went away: the list's own reads
    fail there and the page is drawn again from the primary."""
    read_from(**_dead_postgres())
    run = _run("midway")
    monkeypatch.setattr(read_source, "source", lambda measure=True: ReadSource("reads", replica=True))
    for name in PAGES:
        response = admin_client.get(reverse(name))
        assert response.status_code == 200, name
        assert b"Replica unavailable (a read failed)" in response.content, name
    response = admin_client.get("/api/runs", headers=api_headers)
    assert (response.status_code, response["X-Data-Source"]) == (200, "primary; replica-unavailable")
    assert [item["id"] for item in response.json()["items"]] == [str(run.id)]


@through_reads
def test_a_failed_replica_is_left_alone_for_a_while(read_from, monkeypatch):
    """No connect timeout at every page while it is down: tried again after RETRY_SECONDS."""
    read_from(**_dead_postgres())
    tries = []
    measure = read_source._measure
    monkeypatch.setattr(read_source, "_measure", lambda alias: tries.append(alias) or measure(alias))
    assert read_source.source().unavailable == "cannot read it"
    assert read_source.source() == ReadSource(DEFAULT_DB_ALIAS, unavailable="cannot read it")
    assert tries == ["reads"]
    read_source.forget_failures()  # as RETRY_SECONDS later
    assert read_source.source().unavailable == "cannot read it"
    assert tries == ["reads", "reads"]


def test_read_runs_the_reads_again_on_the_primary_when_the_replica_fails():
    seen = []

    def reads(alias: str) -> str:
        seen.append(alias)
        if alias == "replica":
            raise OperationalError("the replica went away")
        return "rows"

    try:
        rows, found = read_source.read(reads, ReadSource("replica", replica=True))
    finally:
        read_source.forget_failures()
    assert (rows, seen, found.alias, found.unavailable) == (
        "rows",
        ["replica", "default"],
        "default",
        "a read failed",
    )


@pytest.mark.parametrize(
    ("found", "note", "headers"),
    [
        (ReadSource("default"), None, {"X-Data-Source": "primary", "X-Data-Age": "0"}),
        (
            ReadSource("r", replica=True, lag_seconds=3.2),
            "Read from a replica, 3.2 s behind.",
            {"X-Data-Source": "replica", "X-Data-Age": "3.2"},
        ),
        (
            ReadSource("r", replica=True, lag_seconds=0.0),
            "Read from a replica, up to date.",
            {"X-Data-Source": "replica", "X-Data-Age": "0"},
        ),
        (
            ReadSource("r", replica=True, lag_seconds=75.0, paused=True),
            "Read from a replica whose replay is paused, 1 min 15 s behind.",
            {"X-Data-Source": "replica; replay-paused", "X-Data-Age": "75"},
        ),
        (
            ReadSource("r", replica=True, lag_seconds=None),
            "Read from a replica, lag unknown.",
            {"X-Data-Source": "replica"},
        ),
        (
            ReadSource("r", replica=True, lag_seconds=600.0, streaming=False),
            "Read from a replica that is not receiving from the primary; its last replayed change is 10 min old.",
            {"X-Data-Source": "replica; not-streaming", "X-Data-Age": "600"},
        ),
        (
            ReadSource("r", replica=True, lag_seconds=None, vendor="sqlite"),
            "Read from a replica (its lag is not measured on sqlite).",
            {"X-Data-Source": "replica"},
        ),
        (
            ReadSource("default", unavailable="cannot read it"),
            "Replica unavailable (cannot read it): read from the primary.",
            {"X-Data-Source": "primary; replica-unavailable", "X-Data-Age": "0"},
        ),
    ],
)
def test_what_a_source_says(found, note, headers):
    assert (found.note, found.headers()) == (note, headers)
