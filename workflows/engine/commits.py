"""The commit pipeline of one execution: everything a run writes goes through `commit`, one at a
time, in one store transaction each. It carries the body's pending writes (markers, waits,
broadcasts) along with the next commit, snapshots the state only when it changed, stores a
step's live events while the step still runs, and reports each commit to the runner.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from ..core.clock import Clock
from ..core.exceptions import LeaseLost, StoreUnavailable, WorkflowError
from ..core.jsonvalue import check_size, dumps
from ..core.records import ChildStart, Commit, CommitResult, EntryRecord, EntryWrite, EventOrigin
from ..core.replay import History
from ..core.signals import Abandoned, Aborted
from ..storage.base import Store
from .streams import StreamBatcher


class CommitPipeline:
    def __init__(
        self,
        *,
        run_id: str,
        owner: str,
        store: Store,
        clock: Clock,
        history: History,
        state: dict[str, Any],
        on_commit: Callable[[Commit], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.store = store
        self.clock = clock
        self.history = history
        self.state = state  # the execution's live state: mutated in place, never rebound
        self.cancel_requested = False  # set when a commit finds an operator's cancel
        self.hold = False  # set when a commit finds an operator's pause (of the run or its workflow)
        # As stored: a state recorded before the size limit was lowered is not refused until it changes.
        self._committed_state = dumps(state, "the run's state", sized=False)
        self._pending = Commit()
        self._on_commit = on_commit  # the runner's observers, told of each commit once, after it landed
        self.commits = 0  # how many landed
        self._lock = asyncio.Lock()
        self._broken = False  # a write failed in the store: this execution writes nothing more
        self._early: asyncio.Task[None] | None = None  # a commit the body did not wait for
        self._early_failure: BaseException | None = None
        self._live_events: list[tuple[str, Any, EventOrigin]] = []
        self._live_flusher: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.streams = StreamBatcher(self.commit, on_commit)

    # --- the state ---------------------------------------------------------------------------------

    def state_change(self) -> str | None:
        """The state as JSON when it differs from the last one committed, else None."""
        encoded = dumps(self.state, "the run's state", sized=False)
        return None if encoded == self._committed_state else check_size(encoded, "the run's state")

    def restore_committed_state(self) -> None:
        """Put the live state back to the last one stored (the body left one that cannot be)."""
        self.state.clear()
        self.state.update(json.loads(self._committed_state))

    # --- writes that wait for the next commit -------------------------------------------------------

    def add_pending(self, write: EntryWrite) -> None:
        """An entry written with the next commit. The history sees it at once, so a branch that
        re-runs its scope before that commit finds it (one write per slot, the latest)."""
        slot = (write.scope, write.position)
        self._pending.entries = [(w, a) for w, a in self._pending.entries if (w.scope, w.position) != slot]
        self._pending.entries.append((write, None))
        self.history.record(record_of(write, write.id))

    def add_pending_child(self, write: EntryWrite, start: ChildStart) -> None:
        """A `child` entry and the child run it starts: written together, with the next commit."""
        self.add_pending(write)
        self._pending.children = [c for c in self._pending.children if c.parent_queue != start.parent_queue]
        self._pending.children.append(start)

    def add_pending_event(self, event: str, payload: Any) -> None:
        self._pending.events.append((event, payload))

    # --- committing ------------------------------------------------------------------------------------

    async def commit(self, commit: Commit) -> CommitResult:
        """Flush pending writes with `commit`, in one transaction. One commit of a run at a time,
        its state read under the lock: concurrent branches never store an older state after a
        newer one, whatever thread the store runs each commit in. A lost lease raises Aborted; a
        store that failed (connection lost, server restarting) raises Abandoned."""
        if self._early is not None and not self._early.done():
            await asyncio.shield(self._early)  # an early commit goes first, as it was made first
        return await self._commit_in_turn(commit)

    async def _commit_in_turn(self, commit: Commit, taken: Commit | None = None) -> CommitResult:
        async with self._lock:  # checked under the lock: a commit queued behind one that failed
            if self._broken:  # writes nothing after it
                raise Abandoned()
            if self._early_failure is not None:
                raise Aborted() if isinstance(self._early_failure, Aborted) else Abandoned()
            return await self._commit_locked(commit, taken)

    def _take_pending(self, commit: Commit) -> Commit:
        """Move the pending writes into `commit`; returns them (put back if the store refuses it)."""
        pending, self._pending = self._pending, Commit()
        slots = {(w.scope, w.position) for w, _a in commit.entries}
        commit.entries[:0] = [(w, a) for w, a in pending.entries if (w.scope, w.position) not in slots]
        commit.events[:0] = pending.events
        commit.complete[:0] = pending.complete
        commit.children[:0] = pending.children
        return pending

    async def _commit_locked(self, commit: Commit, taken: Commit | None = None) -> CommitResult:
        """`taken`: the pending writes an early commit took when it was made. It carries what the
        run held then, not the state or the writes of what ran since (a step's change belongs to
        that step's commit: were it stored early and that commit lost, the step would apply it
        again when it runs again)."""
        pending = self._take_pending(commit) if taken is None else taken
        encoded = self.state_change() if taken is None else None  # unchanged when it was made
        if encoded is not None:
            # A snapshot: the store may serialize it in another thread while branches go on.
            commit.state = json.loads(encoded)
        try:
            result = await self.store.acommit(
                run_id=self.run_id, owner=self.owner, commit=commit, now=self.clock.now()
            )
        except LeaseLost:
            raise Aborted() from None
        except StoreUnavailable as exc:
            # Whether the write landed is unknown: the next execution reads the history again.
            self._broken = True
            raise Abandoned() from exc
        except WorkflowError:  # refused as a whole (a message to a finished run): nothing was written
            self._restore_pending(pending)
            raise
        if encoded is not None:
            self._committed_state = encoded
        for (write, _attempt), entry_id in zip(commit.entries, result.entry_ids, strict=True):
            self.history.record(record_of(write, entry_id))
        for scope in commit.prune:
            self.history.forget(scope)
        if result.cancel_requested:
            self.cancel_requested = True
        if result.hold:
            self.hold = True
        self.commits += 1
        if self._on_commit is not None:
            self._on_commit(commit)
        return result

    def can_commit_early(self) -> bool:
        """Whether a commit now may go without the body waiting for it (`commit_early`): no
        pending child start and no state change ride with it, so nothing in it can be refused,
        only lost with the lease or the store."""
        return not self._pending.children and not self._broken and self.state_change() is None

    def commit_early(self, commit: Commit) -> None:
        """Send `commit` (a queue wait that took its messages) while the body goes on: the step
        after the wait runs during the round trip instead of after it. The history holds its
        entries at once, as pending writes; the next commit follows it (one at a time, in order),
        and a read of messages waits for it (`settled`). If it fails, nothing later is written:
        the next commit raises Aborted (lease lost) or Abandoned (anything else; the run resumes
        from what landed), so no later record can land without it. Use only when
        `can_commit_early()`."""
        for write, _attempt in commit.entries:
            self.history.record(record_of(write, write.id))
        self._early = asyncio.create_task(self._commit_early(commit, self._take_pending(commit)))

    async def _commit_early(self, commit: Commit, taken: Commit) -> None:
        try:
            await self._commit_in_turn(commit, taken)
        except BaseException as exc:  # the next commit says it (see commit_early)
            self._early_failure = exc
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def settled(self) -> None:
        """Wait until an early commit is written (or has failed: the next commit says so)."""
        if self._early is not None and not self._early.done():
            await asyncio.shield(self._early)

    def _restore_pending(self, pending: Commit) -> None:
        """A commit the store refused (e.g. a message to a finished run) wrote nothing: the body's
        pending writes go with the next commit instead of being lost."""
        pending.entries += self._pending.entries
        pending.events += self._pending.events
        pending.complete += self._pending.complete
        pending.children += self._pending.children
        self._pending = pending

    # --- events a step broadcasts, stored at once -------------------------------------------------

    def broadcast_live(self, event: str, payload: Any, origin: EventOrigin) -> None:
        """From a step (async, or sync in a worker thread): store the event now, in a commit of
        its own, so followers see progress during a slow call rather than after it. Events are
        observations: they stay even when the attempt then fails. An attempt that never records
        an outcome (its runner crashed, the store failed) is cut off: before the run executes
        again, the store records it as lost and marks its events lost (`origin` says which
        attempt sent them)."""
        if threading.get_ident() == self._loop_thread:
            self._queue_live(event, payload, origin)
        else:
            self._loop.call_soon_threadsafe(self._queue_live, event, payload, origin)

    def _queue_live(self, event: str, payload: Any, origin: EventOrigin) -> None:
        self._live_events.append((event, payload, origin))
        if self._live_flusher is None or self._live_flusher.done():
            self._live_flusher = asyncio.create_task(self._flush_live_events())

    async def _flush_live_events(self) -> None:
        while self._live_events:
            batch, self._live_events = self._live_events, []
            try:
                await self.commit(Commit(live_events=batch))
            except (Aborted, Abandoned):  # the step's own commit will find out
                return

    async def drain_live_events(self) -> None:
        """Wait until what steps broadcast and streamed so far is stored (before the step's own
        record)."""
        if self._live_flusher is not None:
            await self._live_flusher
        await self.streams.drain()


def record_of(write: EntryWrite, entry_id: int | None) -> EntryRecord:
    """The record a write leaves, as a later replay of the scope reads it."""
    return EntryRecord(
        # None for a write still pending: the history holds it so until its commit re-records it with
        # the stored id (EntryRecord.id stays `int` for what stores return).
        id=entry_id,  # type: ignore[arg-type]
        scope=write.scope,
        position=write.position,
        name=write.name,
        kind=write.kind,
        status=write.status,
        input=write.input,
        output=write.output,
        error=write.error,
        started_at=write.started_at,
        finished_at=write.finished_at,
        wake_at=write.wake_at,
        attempts=write.attempts,
        meta=write.meta,
    )
