"""Bad input to the admin and the live channels: a search the run list cannot use, an edited
replay input PostgreSQL cannot store or too deep to parse, a deeply nested WebSocket frame. Each
gets a clear answer (an empty list, a form error) and changes nothing; none is a 500 or a crash."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from config.asgi import application
from tests.inspector.test_admin import entry, failed_approval, staff, url, waiting_approval
from workflows.core.ids import short_run_id
from workflows.core.jsonvalue import MAX_DEPTH
from workflows.models import AuditEntry, Entry, Message, Run


@pytest.fixture
def admin_client(client, db):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    "term",
    [
        "0123456789abcdef0123456789abcdef0",  # 33 hex digits: longer than any run id
        "f" * 64,
        "0123456789abcdef-0123456789abcdef-01234567",
    ],
    ids=["33-hex", "64-hex", "dashed-42-hex"],
)
def test_run_search__text_no_run_id_can_match_is_not_an_error(admin_client, term):
    waiting = waiting_approval("search-1")

    response = admin_client.get(url("changelist"), {"q": term})

    assert response.status_code == 200
    assert short_run_id(waiting.id) not in response.content.decode()


@pytest.mark.django_db
def test_run_search__nul_is_not_an_error(admin_client):
    waiting_approval("search-1")

    assert admin_client.get(url("changelist"), {"q": "nul\x00"}).status_code == 200


@pytest.mark.django_db
def test_run_search__a_key_holding_a_long_hex_string_is_found(admin_client):
    from tests.inspector import flows

    key = "ab" * 20  # 40 hex digits: not a run id, searched in keys
    flows.registry.client("approval").get_or_create([key])
    other = waiting_approval("other")

    page = admin_client.get(url("changelist"), {"q": key}).content.decode()

    assert key in page and short_run_id(other.id) not in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("edited", "problem"),
    [
        (json.dumps({"title": "\ud83d"}), "lone surrogate"),  # typed as the JSON escape \ud83d
        (json.dumps({"k\udfff": 1}), "lone surrogate"),
        (json.dumps({"title": "\x00"}), "NUL character"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels"),
        ("[" * 100_000 + "]" * 100_000, "nested more than"),
    ],
    ids=["surrogate", "dict-key", "nul", "too-deep", "far-too-deep"],
)
def test_replay__an_edited_input_that_cannot_be_stored_is_a_form_error(admin_client, edited, problem):
    run = failed_approval()
    prepare = entry(run, "prepare")

    response = admin_client.post(
        url("replay", run.id, prepare.id), {"why": "retitle", "edit_input": "on", "input": edited}
    )

    assert response.status_code == 200
    assert problem in response.content.decode()
    assert Run.objects.get(id=run.id).status == "failed"
    assert not Entry.objects.filter(run=run, superseded=True).exists()
    assert not AuditEntry.objects.exists()


@database_sync_to_async
def _superuser_session_and_run() -> tuple[bytes, str]:
    from tests.inspector import flows

    client = Client()
    client.force_login(User.objects.create_superuser("ws-root", "ws@example.com", "pw"))
    run_id = flows.registry.client("approval").get_or_create(["ws"]).run_id
    return f"sessionid={client.cookies['sessionid'].value}".encode(), run_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/runs/{run}/", "/ws/runs/"], ids=["run-events", "run-list"])
async def test_websocket__a_deeply_nested_or_broken_frame_is_ignored(path):
    cookie, run_id = await _superuser_session_and_run()
    headers = [(b"cookie", cookie), (b"origin", b"http://testserver")]
    ws = WebsocketCommunicator(application, path.format(run=run_id), headers=headers)
    connected, _ = await ws.connect()
    assert connected
    while not await ws.receive_nothing(timeout=0.2):  # what it sends on connecting
        await ws.receive_output()

    await ws.send_to(text_data="[" * 100_000 + "]" * 100_000)
    await ws.send_to(text_data='{"not": "json"')

    assert await ws.receive_nothing(timeout=0.3)  # still open: no error, no close
    await ws.disconnect()


@pytest.mark.django_db
def test_refused_action__nul_in_the_form_is_audited_without_it_not_a_500(client):
    run = failed_approval()
    client.force_login(staff("no-send"))  # may view runs, may not send

    response = client.post(url("send", run.id), {"why": "because\x00", "queue": "q\x00"})

    assert response.status_code == 403
    [audit] = AuditEntry.objects.filter(run=run)
    assert audit.action == "refused" and audit.reason.startswith("because")
    assert "\x00" not in audit.reason and "\x00" not in audit.details["queue"]
    assert Run.objects.get(id=run.id).status == "failed"


@pytest.mark.django_db
def test_send_and_reason__unstorable_text_is_an_error_on_the_page_and_nothing_is_sent(admin_client):
    run = waiting_approval()
    before = Message.objects.count()

    body = admin_client.post(
        url("send", run.id),
        {"why": "ok", "queue": "approve", "body": json.dumps({"by": "\ud83d"}), "confirmed": "1"},
    )
    reason = admin_client.post(url("cancel", run.id), {"why": "nul \x00"})

    assert body.status_code == 200 and "lone surrogate" in body.content.decode()
    assert reason.status_code == 200 and "Null characters are not allowed" in reason.content.decode()
    assert Message.objects.count() == before and not AuditEntry.objects.exists()
    assert Run.objects.get(id=run.id).status == "waiting"
