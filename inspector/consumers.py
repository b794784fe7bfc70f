"""WebSocket consumers: they speak the protocol; the reads are small helpers in the db thread.

`ws/runs/<run_id>/?after=<cursor>` streams a run's events, `{"id", "event", "data"}`, first the
persisted ones after the cursor, then live ones, in id order. With `streams=*` (or `streams=a,b`)
it also sends the chunks steps write to the run's streams, `{"stream", "id", "step", "attempt",
"seq", "data"}`, after their own cursor `stream_after=` (a chunk id; `seq` 0 starts a step's text
over), and ephemeral chunks as they come (`"ephemeral": true`, no id). Every send comes from a database
read of "events after the last id sent", whether a poke or the poll triggered it, so a client
that reconnects with the last id it saw loses nothing and gets nothing twice. With `changes=1`
the stream also carries `{"run": {...}}` whenever the run's status or records change (the
inspector page uses it to refresh itself).

Event ids of one run become visible in id order: the engine inserts them only while holding the
run's row lock (the commit's lease fence), so a later id never commits before an earlier one.

`ws/runs/` streams `{"run": {...}}` for runs created or changed, for the dashboard.

Access (inspector.access): the list needs a session that may view runs (`workflows.view_run`); a
run's stream follows WORKFLOWS["RUN_STREAM_AUTH"] ("token" by default: such a session, or a signed
token for that run). Event payloads are masked. A refused client is accepted and closed at once
with a code a browser can read (a refusal before the handshake reaches it as a bare HTTP 403):
4400 a bad cursor, 4403 not allowed, 4404 no such run (told only to a client allowed to follow it).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workflows.reads import live
from workflows.reads import source as read_source

from . import access
from .live import LIST_GROUP, poll_seconds, run_group

logger = logging.getLogger("inspector.consumers")

BATCH = 500  # events read per query while catching up
LIST_OVERLAP = dt.timedelta(seconds=5)  # re-read this far back: commits land slightly out of order

CLOSE_BAD_REQUEST = 4400
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# The close frame's reason with each code (ASGI `reason`; daphne sends the code only, so clients
# go by the code: the reason is for servers that pass it on, and for logs).
CLOSE_REASONS = {
    CLOSE_BAD_REQUEST: "bad cursor: after= (an event id) and stream_after= (a chunk id) are integers",
    CLOSE_FORBIDDEN: "forbidden: a session that may view runs, or a valid token for this run, is required",
    CLOSE_NOT_FOUND: "no such run",
}


# --- the database helpers ---------------------------------------------------------------------

run_exists = database_sync_to_async(live.run_exists)
events_after = database_sync_to_async(live.events_after)
chunks_after = database_sync_to_async(live.chunks_after)
run_fingerprint = database_sync_to_async(live.run_fingerprint)


# The live list is the dashboard's: it reads WORKFLOWS["READ_DATABASE"] (the primary when that
# fails), without measuring the lag at every poll (the dashboard's figures show it). A lagging
# replica shows changes late, in the order the primary committed them: the watermark still holds.


@database_sync_to_async
def _changed_runs(since: dt.datetime, ids: list[str]) -> list[dict]:
    def changed(using: str) -> list[dict]:
        runs = live.runs_by_id(ids, using) if ids else live.runs_changed_since(since, using=using)
        return [live.run_summary(r) | {"_updated": r.updated_at} for r in runs]

    return read_source.read(changed, measure=False)[0]


@database_sync_to_async
def _latest_change() -> dt.datetime:
    return read_source.read(live.latest_change, measure=False)[0]


# --- access -----------------------------------------------------------------------------------

may_view_runs = database_sync_to_async(access.scope_can_view_runs)
may_follow_run = database_sync_to_async(access.may_follow_run)


def _query(scope: dict) -> dict[str, str]:
    parsed = parse_qs(scope.get("query_string", b"").decode("latin1"))
    return {k: v[-1] for k, v in parsed.items()}


# --- consumers --------------------------------------------------------------------------------


class _Polling(AsyncJsonWebsocketConsumer):
    """Reads on every poke and on a short interval; one read at a time."""

    group: str = ""
    _poller: asyncio.Task | None = None

    async def start(self) -> None:
        self._lock = asyncio.Lock()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.flush()
        self._poller = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        interval = poll_seconds()
        while True:
            await asyncio.sleep(interval)
            try:
                await self.flush()
            except Exception:  # a database hiccup: the next round reads again from the same point
                logger.exception("live read failed for %s", self.group)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        pass  # one-way streams: a client's frame is not even parsed (too deep JSON would crash it)

    async def refuse(self, code: int) -> None:
        """Accept, then close with `code`: only a close after the handshake reaches a browser's
        CloseEvent; nothing is sent before it."""
        await self.accept()
        await self.close(code=code, reason=CLOSE_REASONS[code])

    async def flush(self, **hints) -> None:
        async with self._lock:
            await self.read_and_send(**hints)

    async def read_and_send(self, **hints) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def disconnect(self, code) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)


class RunEventsConsumer(_Polling):
    async def connect(self) -> None:
        query = _query(self.scope)
        try:
            self.last_id = int(query.get("after") or 0)
        except ValueError:
            await self.refuse(CLOSE_BAD_REQUEST)
            return
        self.changes = query.get("changes") in {"1", "true", "yes"}
        # Stream frames: `streams=*` (every stream) or `streams=a,b`; `stream_after=` their cursor.
        wanted = query.get("streams")
        self.streams: list[str] | None = None if wanted in (None, "", "*") else wanted.split(",")
        self.follow_streams = bool(wanted)
        try:
            self.stream_after = int(query.get("stream_after") or 0)
        except ValueError:
            await self.refuse(CLOSE_BAD_REQUEST)
            return
        self.fingerprint: dict | None = None
        # The run as the client last showed it (`live.fingerprint_tag`): no change is reported
        # until the run differs from it.
        self.seen = query.get("seen") or ""
        run_id = live.parse_run_id(self.scope["url_route"]["kwargs"]["run_id"])
        # Allowed first, then whether the run exists: a refused client learns nothing of runs.
        if not await may_follow_run(self.scope, run_id, query.get("token")):
            await self.refuse(CLOSE_FORBIDDEN)
            return
        if run_id is None or not await run_exists(run_id):
            await self.refuse(CLOSE_NOT_FOUND)
            return
        self.run_id = run_id
        self.group = run_group(self.run_id)
        await self.start()

    async def run_poke(self, message: dict) -> None:
        await self.flush()

    async def run_stream(self, message: dict) -> None:
        """Ephemeral chunks, straight from the runner: sent as they come, never stored."""
        if not self.follow_streams:
            return
        for frame in message.get("frames", []):
            if self.streams is None or frame.get("stream") in self.streams:
                await self.send_json(frame)

    async def read_and_send(self) -> None:
        while True:
            events = await events_after(self.run_id, self.last_id, BATCH)
            for event in events:
                await self.send_json(event)
                self.last_id = event["id"]
            if len(events) < BATCH:
                break
        while self.follow_streams:
            chunks = await chunks_after(self.run_id, self.streams, self.stream_after, BATCH)
            for chunk in chunks:
                await self.send_json(chunk)
                self.stream_after = chunk["id"]
            if len(chunks) < BATCH:
                break
        if self.changes:
            fingerprint = await run_fingerprint(self.run_id)
            if fingerprint is not None and fingerprint != self.fingerprint:
                self.fingerprint = fingerprint
                if self.seen and live.fingerprint_tag(fingerprint) == self.seen:
                    self.seen = ""  # what the client shows already: nothing to report
                else:
                    await self.send_json({"run": {"id": self.run_id, **fingerprint}})

    async def receive_json(self, content, **kwargs) -> None:
        pass  # the stream is one-way; clients resume with ?after=<last id>


class RunListConsumer(_Polling):
    group = LIST_GROUP

    async def connect(self) -> None:
        if not await may_view_runs(self.scope):
            await self.refuse(CLOSE_FORBIDDEN)
            return
        self.watermark = await _latest_change()
        self.seen: dict[str, str] = {}  # run id -> updated_at sent
        await self.start()

    async def runs_poke(self, message: dict) -> None:
        await self.flush(ids=[message.get("run_id", "")])

    async def read_and_send(self, ids: list[str] | None = None) -> None:
        changed = await _changed_runs(self.watermark - LIST_OVERLAP, ids or [])
        for summary in changed:
            updated = summary.pop("_updated")
            if self.seen.get(summary["id"]) == summary["updated_at"]:
                continue
            self.seen[summary["id"]] = summary["updated_at"]
            await self.send_json({"run": summary})
            if not ids and updated > self.watermark:
                self.watermark = updated
        horizon = (self.watermark - 2 * LIST_OVERLAP).isoformat()
        self.seen = {k: v for k, v in self.seen.items() if v is None or v >= horizon}

    async def receive_json(self, content, **kwargs) -> None:
        pass
