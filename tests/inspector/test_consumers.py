"""The live channels over Channels' WebsocketCommunicator and the project's ASGI application
(session auth included): ordering, catch-up after a cursor, no duplicates across a reconnect,
pokes and the polling fallback, and the access rules."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from config.asgi import application
from inspector import live
from tests.inspector import flows
from workflows.core.records import Commit, Transition
from workflows.models import Event, Run

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 5  # seconds to wait for a message that must come
ROOT = Path(__file__).resolve().parents[2]


@database_sync_to_async
def new_run(key: str) -> str:
    return flows.registry.client("approval").get_or_create([key]).run_id


@database_sync_to_async
def add_events(run_id: str, *names: str) -> list[int]:
    now = dt.datetime.now(dt.UTC)
    return [Event.objects.create(run_id=run_id, name=n, payload={"n": n}, created_at=now).id for n in names]


@database_sync_to_async
def session_cookie(username: str, *, staff: bool) -> bytes:
    user = User.objects.create_user(username, password="pw", is_staff=staff)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def follow(run_id: str, query: str = "", headers=None) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/runs/{run_id}/{query}", headers=headers or [])


async def receive_all(ws: WebsocketCommunicator, count: int) -> list[dict]:
    return [await ws.receive_json_from(timeout=TIMEOUT) for _ in range(count)]


@pytest.fixture
def no_poll(settings):
    """Pokes only: the poll would take an hour."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "POLL_SECONDS": 3600}


@pytest.fixture
def fast_poll(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "POLL_SECONDS": 0.05}


# --- a run's events ---------------------------------------------------------------------------


async def test_events__persisted_first_in_order_then_live(no_poll):
    run_id = await new_run("e1")
    ids = await add_events(run_id, "a", "b", "c")
    ws = follow(run_id)
    connected, _ = await ws.connect()
    assert connected
    assert await receive_all(ws, 3) == [
        {"id": ids[0], "event": "a", "data": {"n": "a"}},
        {"id": ids[1], "event": "b", "data": {"n": "b"}},
        {"id": ids[2], "event": "c", "data": {"n": "c"}},
    ]
    more = await add_events(run_id, "d", "e")
    assert await ws.receive_nothing(0.2)  # written, but no poke and no poll yet
    await live.on_commit(run_id, Commit())
    assert [m["id"] for m in await receive_all(ws, 2)] == more
    await ws.disconnect()


async def test_events__catch_up_after_a_cursor(no_poll):
    run_id = await new_run("e2")
    ids = await add_events(run_id, "a", "b", "c", "d")
    ws = follow(run_id, f"?after={ids[1]}")
    assert (await ws.connect())[0]
    assert [m["event"] for m in await receive_all(ws, 2)] == ["c", "d"]
    assert await ws.receive_nothing(0.2)
    await ws.disconnect()


async def test_events__reconnect_with_the_last_id_loses_nothing_and_doubles_nothing(fast_poll):
    run_id = await new_run("e3")
    await add_events(run_id, "a", "b")
    first = follow(run_id)
    assert (await first.connect())[0]
    seen = await receive_all(first, 2)
    await first.disconnect()
    await add_events(run_id, "c", "d")  # written while the client was away
    second = follow(run_id, f"?after={seen[-1]['id']}")
    assert (await second.connect())[0]
    seen += await receive_all(second, 2)
    late = await add_events(run_id, "e")
    await live.on_commit(run_id, Commit())  # a poke and the poll race for the same event
    await live.on_commit(run_id, Commit())
    seen += await receive_all(second, 1)
    assert await second.receive_nothing(0.3)
    assert [m["event"] for m in seen] == ["a", "b", "c", "d", "e"]
    assert seen[-1]["id"] == late[0]
    assert len({m["id"] for m in seen}) == 5
    await second.disconnect()


async def test_events__the_poll_alone_delivers_writes_from_other_processes(fast_poll):
    """With the in-memory layer a runner in another process cannot poke us: the poll reads."""
    run_id = await new_run("e4")
    ws = follow(run_id)
    assert (await ws.connect())[0]
    ids = await add_events(run_id, "from-elsewhere")
    assert await ws.receive_json_from(timeout=TIMEOUT) == {
        "id": ids[0],
        "event": "from-elsewhere",
        "data": {"n": "from-elsewhere"},
    }
    await ws.disconnect()


async def test_events__changes_stream_reports_status(no_poll):
    run_id = await new_run("e5")
    ws = follow(run_id, "?changes=1")
    assert (await ws.connect())[0]
    first = await ws.receive_json_from(timeout=TIMEOUT)
    assert first["run"]["id"] == run_id and first["run"]["status"] == "pending"
    await database_sync_to_async(Run.objects.filter(id=run_id).update)(
        status="waiting", updated_at=dt.datetime.now(dt.UTC)
    )
    await live.on_commit(run_id, Commit(transition=Transition(status="waiting")))
    assert (await ws.receive_json_from(timeout=TIMEOUT))["run"]["status"] == "waiting"
    await ws.disconnect()


# --- the list channel ---------------------------------------------------------------------------


async def test_list__staff_see_runs_created_and_changed(fast_poll):
    cookie = await session_cookie("staff", staff=True)
    ws = WebsocketCommunicator(application, "/ws/runs/", headers=[(b"cookie", cookie)])
    assert (await ws.connect())[0]
    run_id = await new_run("l1")
    created = await ws.receive_json_from(timeout=TIMEOUT)
    assert created["run"]["id"] == run_id and created["run"]["status"] == "pending"
    assert created["run"]["workflow"] == "approval" and created["run"]["key"] == ["l1"]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(milliseconds=5)
    await database_sync_to_async(Run.objects.filter(id=run_id).update)(status="failed", updated_at=later)
    changed = await ws.receive_json_from(timeout=TIMEOUT)
    assert changed["run"]["id"] == run_id and changed["run"]["status"] == "failed"
    assert await ws.receive_nothing(0.2)
    await ws.disconnect()


async def test_list__a_transition_pokes_the_list(no_poll):
    cookie = await session_cookie("staff", staff=True)
    ws = WebsocketCommunicator(application, "/ws/runs/", headers=[(b"cookie", cookie)])
    assert (await ws.connect())[0]
    run_id = await new_run("l2")
    assert await ws.receive_nothing(0.2)  # no poll, and creating a run pokes nobody
    await live.on_commit(run_id, Commit())  # a commit without a transition leaves the list alone
    assert await ws.receive_nothing(0.2)
    await live.on_commit(run_id, Commit(transition=Transition(status="waiting")))
    assert (await ws.receive_json_from(timeout=TIMEOUT))["run"]["id"] == run_id
    await ws.disconnect()


# --- access -----------------------------------------------------------------------------------


async def test_access__anyone_with_a_run_id_may_follow_that_run(no_poll):
    run_id = await new_run("x1")
    ws = follow(run_id)  # no session at all
    assert (await ws.connect())[0]
    await ws.disconnect()


@pytest.mark.parametrize(
    "path",
    [
        "/ws/runs/00000000-0000-4000-8000-000000000000/",  # unknown run
        "/ws/runs/not-a-uuid/",
    ],
)
async def test_access__unknown_or_malformed_run_ids_are_refused(no_poll, path):
    ws = WebsocketCommunicator(application, path)
    connected, code = await ws.connect()
    assert not connected and code == 4404


async def test_access__a_bad_cursor_is_refused(no_poll):
    run_id = await new_run("x2")
    connected, code = await follow(run_id, "?after=abc").connect()
    assert not connected and code == 4400


async def test_access__the_list_needs_a_staff_session(no_poll):
    anonymous = WebsocketCommunicator(application, "/ws/runs/")
    assert await anonymous.connect() == (False, 4403)
    plain = await session_cookie("plain", staff=False)
    user = WebsocketCommunicator(application, "/ws/runs/", headers=[(b"cookie", plain)])
    assert await user.connect() == (False, 4403)
    cookie = await session_cookie("staff", staff=True)
    other_site = WebsocketCommunicator(
        application,
        "/ws/runs/",
        headers=[(b"cookie", cookie), (b"origin", b"https://evil.example"), (b"host", b"testserver")],
    )
    assert await other_site.connect() == (False, 4403)
    same_site = WebsocketCommunicator(
        application,
        "/ws/runs/",
        headers=[(b"cookie", cookie), (b"origin", b"http://testserver"), (b"host", b"testserver")],
    )
    assert (await same_site.connect())[0]
    await same_site.disconnect()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL (the Redis channel layer)")
async def test_events__a_poke_from_another_process_arrives_through_redis(no_poll):
    """The runner's commit hook in another process reaches this consumer through Redis."""
    run_id = await new_run("redis-1")
    ws = follow(run_id)
    assert (await ws.connect())[0]
    ids = await add_events(run_id, "from-the-runner")
    assert await ws.receive_nothing(0.2)  # no poll: only a poke can deliver it
    script = (
        "import asyncio, django; django.setup()\n"
        "from inspector.live import on_commit\n"
        "from workflows.core.records import Commit\n"
        f"asyncio.run(on_commit({run_id!r}, Commit()))\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)
    assert await proc.wait() == 0
    assert (await ws.receive_json_from(timeout=TIMEOUT))["id"] == ids[0]
    await ws.disconnect()
