"""The in-process client: start runs, send them messages, call their actions, read their events.

Sync methods with `a`-prefixed async twins, as in Django's ORM.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..core.clock import Clock
from ..core.concurrency import check_priority
from ..core.exceptions import BadInput, MessageTimeout, RunFinished, RunNotFound
from ..core.jsonvalue import normalize
from ..core.keys import validate_key
from ..core.new_run import NewRun
from ..core.records import TERMINAL, EventRecord, MessageRecord, OutgoingMessage, RunnerRecord, RunRecord
from ..core.streams import ChunkRecord
from ..core.values import ActionContext
from ..telemetry.tracing import producer_span
from . import host
from .definition import Workflow

if TYPE_CHECKING:
    from ..storage.base import Store
    from ..storage.methods import Statement

WAIT_POLL_START = 0.01  # seconds: first look for a completed message, doubling ...
WAIT_POLL_MAX = 0.25  # seconds: ... up to this
ON_CONFLICT = ("existing", "replace")  # get_or_create's answers to a key that already has a run
MAX_DEBOUNCE = 7 * 24 * 3600.0  # seconds: the longest debounce a start may ask for


class Workflows(Protocol):
    """What a client needs of the registry (`engine.registry.Registry`, which builds clients)."""

    def get(self, name: str) -> Workflow: ...


class WorkflowClient:
    """Runs of one workflow, addressed by key."""

    def __init__(
        self, registry: Workflows, name: str, store: Store | None = None, clock: Clock | None = None
    ) -> None:
        self.registry = registry
        self.name = name
        self.definition: Workflow = registry.get(name)
        self.store = store or host.store()
        # Due times and start times are set on the store's clock (the database's), so a run
        # started from a host whose wall clock is off is due when every runner thinks it is.
        self.clock: Clock = clock or self.store.shared_clock

    def _handle(self, run: RunRecord, created: bool = False) -> RunHandle:
        return RunHandle(self, run, created)

    def start_args(
        self,
        key: list[str] | tuple[str, ...],
        state: Mapping[str, Any] | None,
        on_conflict: str,
        debounce: float | None,
        priority: int,
    ) -> NewRun:
        """Checked before anything is written: a bad key, option, priority or state (or a failing
        concurrency key function) changes nothing."""
        if on_conflict not in ON_CONFLICT:
            raise BadInput(f"on_conflict must be one of {', '.join(ON_CONFLICT)}, not {on_conflict!r}")
        if debounce is not None and (
            isinstance(debounce, bool)
            or not isinstance(debounce, int | float)
            or not 0 < debounce <= MAX_DEBOUNCE
        ):
            raise BadInput(
                f"debounce must be a number of seconds over 0 and up to {MAX_DEBOUNCE:g}, not {debounce!r}"
            )
        if state is not None and not isinstance(state, Mapping):
            raise BadInput(f"state must be a dict of initial state values, not {type(state).__name__}")
        check_priority(priority)
        initial = self.definition.initial_state()
        if state:
            initial = normalize({**initial, **state}, "initial state")
        key = validate_key(key)
        return NewRun(
            workflow=self.name,
            key=key,
            priority=priority,
            concurrency_group=self.definition.group(self.name, key),
            version=self.definition.version,
            initial_state=initial,
            now=self.clock.now(),
        )

    def get_or_create(
        self,
        key: list[str] | tuple[str, ...],
        *,
        state: Mapping[str, Any] | None = None,
        on_conflict: str = "existing",
        debounce: float | None = None,
        priority: int = 0,
        message: tuple[str, Any] | None = None,
        together: Sequence[Statement] = (),
    ) -> RunHandle:
        """The run of this key, created (and started) when missing: a stable key makes starts
        idempotent (traced as a PRODUCER span whose context a new run keeps, tracing on). `state` is merged over the workflow's initial state of a run this creates.
        `priority` (-100..100, default 0) orders a new run's claims: higher first, FIFO within one.
        `on_conflict`: "existing" (the default) returns the run the key already has, finished or
        not; "replace" detaches that run from the key (asking it to cancel when it is live) and
        starts a new one under the key. `debounce=N` (seconds): the run starts N seconds after the
        last such start of the key; each one that comes before the run has started pushes it back
        and replaces its `state`. `message=(queue, body)`: a run this call creates gets it as its
        first message, stored with the run (one statement on PostgreSQL), so no runner ever sees
        the run without it; a run the key already has does not get it (`handle.created` tells).
        `together=[(sql, params), ...]`: rows of the caller's own (an idempotency record) written
        first in the start's transaction, whether it creates the run or finds it: one that fails
        (a unique key taken) leaves nothing written and raises the database's error; from an
        async view (`aget_or_create`) they go in the start's one round trip. Not with
        `on_conflict="replace"` or `debounce`."""
        new = self.start_args(key, state, on_conflict, debounce, priority)
        first = self._first_message(message)
        _check_together(together, on_conflict, debounce)
        with producer_span("start", self.name) as producer:
            if first is not None:  # the message carries the start's trace context, as the run does
                new = new.but(first_message=dataclasses.replace(first, trace_context=producer.carrier))
            if on_conflict == "existing" and debounce is None:
                run, created = self.store.get_or_create_run(new.but(trace_context=producer.carrier), together)
            else:
                run, created = self.store.start_run(new, replace=on_conflict == "replace", debounce=debounce)
            producer.produced(run_id=run.id, created=created)
        return self._handle(run, created)

    async def aget_or_create(
        self,
        key: list[str] | tuple[str, ...],
        *,
        state: Mapping[str, Any] | None = None,
        on_conflict: str = "existing",
        debounce: float | None = None,
        priority: int = 0,
        message: tuple[str, Any] | None = None,
        together: Sequence[Statement] = (),
    ) -> RunHandle:
        await self.clock.anow()  # read the database's time now if due: start_args may not (in a loop)
        new = self.start_args(key, state, on_conflict, debounce, priority)
        first = self._first_message(message)
        _check_together(together, on_conflict, debounce)
        with producer_span("start", self.name) as producer:
            if first is not None:  # the message carries the start's trace context, as the run does
                new = new.but(first_message=dataclasses.replace(first, trace_context=producer.carrier))
            if on_conflict == "existing" and debounce is None:
                run, created = await self.store.aget_or_create_run(
                    new.but(trace_context=producer.carrier), together
                )
            else:
                run, created = await self.store.astart_run(
                    new, replace=on_conflict == "replace", debounce=debounce
                )
            producer.produced(run_id=run.id, created=created)
        return self._handle(run, created)

    def _first_message(self, message: tuple[str, Any] | None) -> OutgoingMessage | None:
        """`message=(queue, body)` checked as a send checks it, before anything is written."""
        if message is None:
            return None
        if not isinstance(message, tuple | list) or len(message) != 2 or not isinstance(message[0], str):
            raise BadInput(f"message must be a (queue, body) pair, not {message!r}")
        queue, body = message
        spec = self.definition.queue_spec(queue, self.name)
        return OutgoingMessage(queue=queue, body=spec.validate(f"queue {self.name}.{queue}", body))

    def get(self, key: list[str] | tuple[str, ...]) -> RunHandle:
        """The run of this key; raises RunNotFound."""
        return self._handle(self.store.find_run(self.name, validate_key(key)))

    async def aget(self, key: list[str] | tuple[str, ...]) -> RunHandle:
        return self._handle(await self.store.afind_run(self.name, validate_key(key)))

    def get_by_id(self, run_id: str) -> RunHandle:
        return self._handle(self._check(self.store.get_run(run_id)))

    async def aget_by_id(self, run_id: str) -> RunHandle:
        return self._handle(self._check(await self.store.aget_run(run_id)))

    def _check(self, run: RunRecord) -> RunRecord:
        if run.workflow != self.name:
            raise RunNotFound(f"run {run.id} is a {run.workflow} run, not {self.name}")
        return run


class RunHandle:
    """One run. Reads go to the store each time: `info()` is the run as stored now."""

    def __init__(self, client: WorkflowClient, run: RunRecord, created: bool = False) -> None:
        self._client = client
        self.created = created  # True when get_or_create made this run
        self.run_id = run.id
        self.workflow = run.workflow
        self.key = tuple(run.key)
        self.snapshot = run  # as read when the handle was made

    def __repr__(self) -> str:
        return f"<RunHandle {self.workflow}{list(self.key)} {self.run_id}>"

    # --- reads ---
    def info(self) -> RunRecord:
        return self._client.store.get_run(self.run_id)

    async def ainfo(self) -> RunRecord:
        return await self._client.store.aget_run(self.run_id)

    def events(self, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        return self._client.store.list_events(self.run_id, after=after, limit=limit)

    async def aevents(self, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        return await self._client.store.alist_events(self.run_id, after=after, limit=limit)

    def chunks(self, name: str, after: int = 0, limit: int = 1000) -> list[ChunkRecord]:
        """The chunks of stream `name` stored after the cursor `after`, oldest first (see `stream`)."""
        return self._client.store.list_chunks(self.run_id, name, after=after, limit=limit)

    async def stream(
        self, name: str, after: int = 0, *, wait: bool = True, poll: float = 0.2
    ) -> AsyncIterator[ChunkRecord]:
        """The chunks of stream `name` after the cursor `after` (a chunk's id), oldest first. With
        `wait`, it goes on as chunks are stored and ends once the run has finished and every chunk
        was read; with `wait=False`, it yields what is stored now. A chunk with `seq` 0 starts its
        step's text over (a retry, a rerun after a crash): keep only the latest attempt's text."""
        store = self._client.store
        while True:
            finished = (await store.aget_run(self.run_id)).status in TERMINAL if wait else True
            chunks = await store.alist_chunks(self.run_id, name, after=after)
            for chunk in chunks:
                yield chunk
                after = chunk.id
            if chunks:
                continue
            if finished:
                return
            await asyncio.sleep(poll)

    def runners(self) -> list[RunnerRecord]:
        """The runners alive now (whatever they serve): `workflow in r.workflows` tells whether
        one can take this run; none means it waits until one starts."""
        now = self._client.clock.now()
        return [r for r in self._client.store.list_runners() if r.alive(now)]

    async def arunners(self) -> list[RunnerRecord]:
        now = await self._client.clock.anow()
        return [r for r in await self._client.store.alist_runners() if r.alive(now)]

    # --- messages ---
    def _outgoing(
        self, queue: str, body: Any, trace_context: dict[str, str] | None, priority: int | None = None
    ) -> OutgoingMessage:
        spec = self._client.definition.queue_spec(queue, self.workflow)
        return OutgoingMessage(
            queue=queue,
            body=spec.validate(f"queue {self.workflow}.{queue}", body),
            run_id=self.run_id,
            trace_context=trace_context,
            priority=None if priority is None else check_priority(priority),
        )

    def send(
        self,
        queue: str,
        body: Any = None,
        *,
        wait: bool = False,
        timeout: float = 30.0,
        priority: int | None = None,
    ) -> Any:
        """Store a message for the run and return it. With `wait`, block until the run completes
        it and return the response instead (MessageTimeout after `timeout` s; it stays queued).
        With `priority` (-100..100) the run takes that priority for its claims from now on (a
        start message's priority). Traced as a PRODUCER span whose context the message keeps."""
        with producer_span("send", self.workflow, queue=queue, run_id=self.run_id) as producer:
            outgoing = self._outgoing(queue, body, producer.carrier, priority)
            message = self._client.store.send(outgoing, now=self._client.clock.now())
            producer.produced(message_id=message.id)
        return self.response(message.id, timeout=timeout) if wait else message

    async def asend(
        self,
        queue: str,
        body: Any = None,
        *,
        wait: bool = False,
        timeout: float = 30.0,
        priority: int | None = None,
    ) -> Any:
        with producer_span("send", self.workflow, queue=queue, run_id=self.run_id) as producer:
            outgoing = self._outgoing(queue, body, producer.carrier, priority)
            message = await self._client.store.asend(outgoing, now=await self._client.clock.anow())
            producer.produced(message_id=message.id)
        return await self.aresponse(message.id, timeout=timeout) if wait else message

    def response(self, message_id: int, *, timeout: float = 30.0) -> Any:
        """Wait for the run to complete message `message_id` and return its response. Raises
        MessageTimeout, or RunFinished when the run ended without taking the message."""
        deadline, pause = time.monotonic() + timeout, WAIT_POLL_START
        while True:
            message = self._client.store.get_message(message_id)
            if message.completed_at is not None:
                return message.response
            if message.consumed_at is None:
                self._raise_if_finished(message, self.info())
            if time.monotonic() >= deadline:
                raise MessageTimeout(f"message {message_id} was not completed within {timeout:g}s")
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, WAIT_POLL_MAX)

    async def aresponse(self, message_id: int, *, timeout: float = 30.0) -> Any:
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + timeout, WAIT_POLL_START
        while True:
            message = await self._client.store.aget_message(message_id)
            if message.completed_at is not None:
                return message.response
            if message.consumed_at is None:
                self._raise_if_finished(message, await self.ainfo())
            if loop.time() >= deadline:
                raise MessageTimeout(f"message {message_id} was not completed within {timeout:g}s")
            await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
            pause = min(pause * 2, WAIT_POLL_MAX)

    def _raise_if_finished(self, message: MessageRecord, run: RunRecord) -> None:
        if run.status in TERMINAL:
            raise RunFinished(f"run {self.run_id} is {run.status}; message {message.id} will not be answered")

    # --- actions ---
    def _action_context(self, run: RunRecord) -> ActionContext:
        return ActionContext(
            run_id=run.id, key=tuple(run.key), status=run.status, state=run.state, result=run.result
        )

    def action(self, name: str) -> Any:
        fn = self._client.definition.action_fn(name, self.workflow)
        result = fn(self._action_context(self.info()))
        if inspect.isawaitable(result):
            raise TypeError(f"action {name!r} is async: call `await handle.aaction(...)`")
        return result

    async def aaction(self, name: str) -> Any:
        fn = self._client.definition.action_fn(name, self.workflow)
        result = fn(self._action_context(await self.ainfo()))
        if inspect.isawaitable(result):
            result = await result
        return result

    # --- control ---
    def cancel(self) -> RunRecord:
        """Ask the run to stop: a waiting run ends cancelled at once, a running one at its next entry."""
        return self._client.store.request_cancel(self.run_id, now=self._client.clock.now())

    async def acancel(self) -> RunRecord:
        return await self._client.store.arequest_cancel(self.run_id, now=await self._client.clock.anow())


def _check_together(together: Sequence[Statement], on_conflict: str, debounce: float | None) -> None:
    if together and (on_conflict != "existing" or debounce is not None):
        raise BadInput('together= is for a plain start: not with on_conflict="replace" or debounce')
