"""The live channels over Channels' WebsocketCommunicator and the project's ASGI application
(Origin check and session auth included): ordering, catch-up after a cursor, no duplicates across
a reconnect, pokes and the polling fallback, masking, and the access rules with their close codes."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.core import signing
from django.test import Client

from config.asgi import application
from inspector import access, consumers, live
from tests.inspector import flows
from workflows.core.records import Commit, Transition
from workflows.masking import MASK
from workflows.models import Event, Run
from workflows.reads import live as live_reads

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 5  # seconds to wait for a message that must come
ROOT = Path(__file__).resolve().parents[2]
SAME_SITE = [(b"origin", b"http://testserver"), (b"host", b"testserver")]  # what a browser sends


@database_sync_to_async
def new_run(key: str) -> str:
    return flows.registry.client("approval").get_or_create([key]).run_id


@database_sync_to_async
def add_events(run_id: str, *names: str) -> list[int]:
    now = dt.datetime.now(dt.UTC)
    return [Event.objects.create(run_id=run_id, name=n, payload={"n": n}, created_at=now).id for n in names]


@database_sync_to_async
def session_cookie(username: str, *, staff: bool, perms: tuple[str, ...] = ("view_run",)) -> bytes:
    user = User.objects.create_user(username, password="pw", is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(codename__in=perms))
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def follow(run_id: str, query: str = "", headers=None, *, token: bool = True) -> WebsocketCommunicator:
    """A client of the run's stream from the same site; with the run's token unless told not to."""
    if token:
        query += ("&" if query else "?") + f"token={access.run_stream_token(run_id)}"
    return WebsocketCommunicator(
        application, f"/ws/runs/{run_id}/{query}", headers=[*SAME_SITE, *(headers or [])]
    )


def run_list(cookie: bytes | None = None, headers=SAME_SITE) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application, "/ws/runs/", headers=[*headers, *([(b"cookie", cookie)] if cookie else [])]
    )


async def close_code(ws: WebsocketCommunicator) -> int:
    """A refused client: accepted, then closed at once with a code (so a browser can read it), and
    sent nothing before."""
    connected, _ = await ws.connect(timeout=TIMEOUT)
    assert connected, "refusals close after the handshake"
    closing = await ws.receive_output(TIMEOUT)
    assert closing["type"] == "websocket.close", closing
    assert closing["reason"] == consumers.CLOSE_REASONS[closing["code"]]  # distinct, and said
    return closing["code"]


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


async def test_events__a_page_that_shows_the_run_as_it_is_gets_no_opening_frame(no_poll):
    """The inspector's page passes the run as it rendered it (`seen=`): the stream reports a change
    only when the run differs from that, so a page does not fetch its body again on opening."""
    run_id = await new_run("e6")
    seen = live_reads.fingerprint_tag(await database_sync_to_async(live_reads.run_fingerprint)(run_id))
    ws = follow(run_id, f"?changes=1&seen={seen}")
    assert (await ws.connect())[0]
    assert await ws.receive_nothing(0.3)
    await database_sync_to_async(Run.objects.filter(id=run_id).update)(
        status="waiting", updated_at=dt.datetime.now(dt.UTC)
    )
    await live.on_commit(run_id, Commit(transition=Transition(status="waiting")))
    assert (await ws.receive_json_from(timeout=TIMEOUT))["run"]["status"] == "waiting"
    await ws.disconnect()

    stale = follow(run_id, f"?changes=1&seen={seen}")  # rendered before the change: told at once
    assert (await stale.connect())[0]
    assert (await stale.receive_json_from(timeout=TIMEOUT))["run"]["status"] == "waiting"
    await stale.disconnect()


# --- the list channel ---------------------------------------------------------------------------


async def test_list__staff_see_runs_created_and_changed(fast_poll):
    cookie = await session_cookie("staff", staff=True)
    ws = run_list(cookie)
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
    ws = run_list(cookie)
    assert (await ws.connect())[0]
    run_id = await new_run("l2")
    assert await ws.receive_nothing(0.2)  # no poll, and creating a run pokes nobody
    await live.on_commit(run_id, Commit())  # a commit without a transition leaves the list alone
    assert await ws.receive_nothing(0.2)
    await live.on_commit(run_id, Commit(transition=Transition(status="waiting")))
    assert (await ws.receive_json_from(timeout=TIMEOUT))["run"]["id"] == run_id
    await ws.disconnect()


# --- access -----------------------------------------------------------------------------------

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def aged_token(run_id: str, seconds: int) -> str:
    """A real token, signed `seconds` ago."""

    class Then(signing.TimestampSigner):
        def timestamp(self) -> str:
            return signing.b62_encode(int(dt.datetime.now(dt.UTC).timestamp()) - seconds)

    return Then(salt=access.TOKEN_SALT).sign(run_id).split(":", 1)[1]


@pytest.fixture
def stream_auth(settings):
    def use(mode: str) -> None:
        settings.WORKFLOWS = {**settings.WORKFLOWS, "RUN_STREAM_AUTH": mode}

    return use


async def test_access__by_default_a_run_needs_its_token_or_a_viewer_session(no_poll):
    run_id, other = await new_run("t1"), await new_run("t2")
    await add_events(run_id, "a")
    # No token, another run's token, a token signed with another salt, an expired one: refused.
    assert await close_code(follow(run_id, token=False)) == 4403
    assert await close_code(follow(run_id, f"?token={access.run_stream_token(other)}", token=False)) == 4403
    forged = signing.TimestampSigner(salt="something-else").sign(run_id).split(":", 1)[1]
    assert await close_code(follow(run_id, f"?token={forged}", token=False)) == 4403
    assert await close_code(follow(run_id, f"?token={aged_token(run_id, 3601)}", token=False)) == 4403
    # Its own token, fresh or within the hour: the events.
    for token in (access.run_stream_token(run_id), aged_token(run_id, 3500)):
        ws = follow(run_id, f"?token={token}", token=False)
        assert (await ws.connect())[0]
        assert (await ws.receive_json_from(timeout=TIMEOUT))["event"] == "a"
        await ws.disconnect()
    # A staff session with view_run needs none; one without view_run gets nothing.
    viewer = await session_cookie("viewer", staff=True)
    ws = follow(run_id, headers=[(b"cookie", viewer)], token=False)
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=TIMEOUT))["event"] == "a"
    await ws.disconnect()
    staff_only = await session_cookie("staff-only", staff=True, perms=())
    assert await close_code(follow(run_id, headers=[(b"cookie", staff_only)], token=False)) == 4403


async def test_access__the_token_lifetime_is_a_setting(no_poll, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RUN_STREAM_TOKEN_SECONDS": 60}
    run_id = await new_run("t3")
    assert await close_code(follow(run_id, f"?token={aged_token(run_id, 120)}", token=False)) == 4403
    ws = follow(run_id, f"?token={aged_token(run_id, 30)}", token=False)
    assert (await ws.connect())[0]
    await ws.disconnect()


async def test_access__session_mode_takes_no_tokens(no_poll, stream_auth):
    run_id = await new_run("s1")
    token = access.run_stream_token(run_id)  # made while tokens were taken
    stream_auth("session")
    assert access.run_stream_token(run_id) is None  # nothing to hand out
    assert await close_code(follow(run_id, f"?token={token}", token=False)) == 4403
    viewer = await session_cookie("viewer", staff=True)
    ws = follow(run_id, headers=[(b"cookie", viewer)], token=False)
    assert (await ws.connect())[0]
    await ws.disconnect()


async def test_access__open_mode_lets_anyone_with_the_run_id_follow_it(no_poll, stream_auth):
    stream_auth("open")
    run_id = await new_run("o1")
    ws = follow(run_id, token=False)  # no session, no token
    assert (await ws.connect())[0]
    await ws.disconnect()
    assert await close_code(follow(UNKNOWN, token=False)) == 4404
    assert await close_code(follow("not-a-uuid", token=False)) == 4404


async def test_access__a_bad_mode_refuses_rather_than_opening(no_poll, stream_auth):
    stream_auth("opne")
    run_id = await new_run("b1")
    ws = follow(run_id, token=False)
    with pytest.raises(Exception, match="RUN_STREAM_AUTH"):
        await ws.connect(timeout=TIMEOUT)


async def test_access__unknown_runs_are_404_only_to_clients_allowed_to_follow_them(no_poll):
    viewer = await session_cookie("viewer", staff=True)
    for path in (UNKNOWN, "not-a-uuid"):
        assert await close_code(follow(path, token=False)) == 4403  # a stranger learns nothing
        assert await close_code(follow(path, headers=[(b"cookie", viewer)], token=False)) == 4404
    assert await close_code(follow(UNKNOWN)) == 4404  # a valid token for a run that is gone


async def test_access__a_bad_cursor_is_refused(no_poll):
    run_id = await new_run("x2")
    assert await close_code(follow(run_id, "?after=abc")) == 4400


async def test_access__event_payloads_are_masked(no_poll):
    run_id = await new_run("m1")
    now = dt.datetime.now(dt.UTC)
    payload = {
        "stage": "enriching",
        "api_key": "sk-live-abcdefghijklmnopqrstuv",
        "detail": "postgres://u:pw9@db/x",
    }
    await database_sync_to_async(Event.objects.create)(
        run_id=run_id, name="progress", payload=payload, created_at=now
    )
    ws = follow(run_id)
    assert (await ws.connect())[0]
    sent = await ws.receive_json_from(timeout=TIMEOUT)
    assert sent["data"] == {"stage": "enriching", "api_key": MASK, "detail": f"postgres://u:{MASK}@db/x"}
    await ws.disconnect()


async def test_access__the_list_needs_a_viewer_session_from_the_same_site(no_poll):
    assert await close_code(run_list()) == 4403
    plain = await session_cookie("plain", staff=False)
    assert await close_code(run_list(plain)) == 4403
    staff_only = await session_cookie("staff-only", staff=True, perms=())
    assert await close_code(run_list(staff_only)) == 4403  # the admin refuses them too
    cookie = await session_cookie("staff", staff=True)
    # Another host's page, even one in ALLOWED_HOSTS, cannot borrow the session.
    other_host = [(b"origin", b"http://localhost"), (b"host", b"testserver")]
    assert await close_code(run_list(cookie, headers=other_host)) == 4403
    same_site = run_list(cookie)
    assert (await same_site.connect())[0]
    await same_site.disconnect()


@pytest.mark.parametrize("origin", [b"https://evil.example", b"http://testserver.evil.example"])
async def test_access__origins_outside_allowed_hosts_are_refused_at_the_handshake(no_poll, origin):
    """config/asgi.py's origin check: refused before any consumer runs (a browser sees an HTTP
    403), whatever the client holds."""
    run_id = await new_run("origin-1")
    cookie = await session_cookie("staff", staff=True)
    headers = [(b"host", b"testserver"), (b"cookie", cookie)] + ([(b"origin", origin)] if origin else [])
    query = f"?token={access.run_stream_token(run_id)}"
    for path in (f"/ws/runs/{run_id}/{query}", "/ws/runs/"):
        connected, _ = await WebsocketCommunicator(application, path, headers=headers).connect(
            timeout=TIMEOUT
        )
        assert not connected, path


async def test_access__a_client_without_origin_follows_a_run_with_its_token(no_poll):
    """A client that is not a browser (no Origin) is admitted with the run's token and receives
    its events; without a token, or with another run's, it is refused (at the handshake, or by
    the consumer with 4403)."""
    run_id = await new_run("no-origin-1")
    other = await new_run("no-origin-2")
    host = [(b"host", b"testserver")]
    [event_id] = await add_events(run_id, "seen")
    ws = WebsocketCommunicator(
        application, f"/ws/runs/{run_id}/?token={access.run_stream_token(run_id)}", headers=host
    )
    assert (await ws.connect(timeout=TIMEOUT))[0]
    [message] = await receive_all(ws, 1)
    assert message["id"] == event_id
    await ws.disconnect()
    for path in (f"/ws/runs/{run_id}/", "/ws/runs/"):
        connected, _ = await WebsocketCommunicator(application, path, headers=host).connect(timeout=TIMEOUT)
        assert not connected, path
    wrong = WebsocketCommunicator(
        application, f"/ws/runs/{run_id}/?token={access.run_stream_token(other)}", headers=host
    )
    assert await close_code(wrong) == 4403


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
