"""What the runner tells its observers (traces, metrics, logs): after the fact, never in the way.

An observer sees each execution of a run begin and end, and every commit the execution made in
between. A step attempt (with its timing, outcome and the delay that follows), a wait, a message
sent and a run's transition are all in those commits, so observers report what was *stored*, not
what was tried: a replayed entry writes nothing and is never reported again, and an attempt cut
off by a crash is reported once, when the next execution records it as lost.

Observers run on the runner's event loop, in line: each call must be cheap and must not block.
One that raises is logged and otherwise ignored; it never changes what a run does.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ..core.clock import Clock
from ..core.records import Commit, RunRecord

logger = logging.getLogger(__name__)

logger_runner = logging.getLogger("workflows.engine.runner")  # where a hook's failure was always logged
CommitHook = Callable[[str, Commit], Awaitable[None]]  # WORKFLOWS["COMMIT_HOOKS"]: `hook(run_id, commit)`


@dataclass(frozen=True, kw_only=True)
class RunnerSample:
    """A runner's own figures, sampled every few seconds."""

    owner: str
    slots_used: int
    slots_free: int
    loop_lag: float  # seconds the event loop was late to wake a timer: a blocked loop shows here
    clock_offset: float | None = None  # seconds the host's wall clock is ahead of the database's


class Observer:
    """Override what you need; every method's default does nothing."""

    def attached(self, *, clock: Clock) -> None:
        """A runner that will report to this observer starts; `clock` is the one it decides on
        (the database's time): what to measure a run's age against, as run times are on it."""

    def execution_started(self, run: RunRecord, *, owner: str, claimed_at: dt.datetime) -> None:
        """A runner claimed `run` and executes it now (`run.fresh`: its first execution;
        `run.taken_over`: the last one was cut off). `claimed_at - run.due_at` is how late it
        started (`run.wake_at` is the new lease's expiry by now; `due_at` is None when the runner
        resumes a run it still holds after the store failed: no schedule was involved)."""

    def committed(self, run: RunRecord, commit: Commit) -> None:
        """The execution of `run` stored `commit` (steps' attempts, waits, events, messages,
        a transition). Called once per commit, in order, after it landed."""

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        """The execution ended: completed | failed | cancelled | waiting | released | lost |
        abandoned (see engine.execution.Ended). `lost`: another runner holds the run now;
        `abandoned`: the store failed, the run is executed again."""

    def runner_sampled(self, sample: RunnerSample) -> None:
        """The runner's slots and event-loop lag, every SAMPLE_EVERY seconds."""


class Observers(Observer):
    """Many observers as one: each is called in turn; one that raises is logged and skipped."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self.observers = list(observers)

    def __bool__(self) -> bool:
        return bool(self.observers)

    def attached(self, *, clock: Clock) -> None:
        for observer in self.observers:
            try:
                observer.attached(clock=clock)
            except Exception:
                logger.exception("observer %r failed (ignored)", observer)

    def execution_started(self, run: RunRecord, *, owner: str, claimed_at: dt.datetime) -> None:
        for observer in self.observers:
            try:
                observer.execution_started(run, owner=owner, claimed_at=claimed_at)
            except Exception:
                logger.exception("observer %r failed (ignored)", observer)

    def committed(self, run: RunRecord, commit: Commit) -> None:
        for observer in self.observers:
            try:
                observer.committed(run, commit)
            except Exception:
                logger.exception("observer %r failed (ignored)", observer)

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        for observer in self.observers:
            try:
                observer.execution_ended(run, status=status, wake_at=wake_at)
            except Exception:
                logger.exception("observer %r failed (ignored)", observer)

    def runner_sampled(self, sample: RunnerSample) -> None:
        for observer in self.observers:
            try:
                observer.runner_sampled(sample)
            except Exception:
                logger.exception("observer %r failed (ignored)", observer)


class CommitHooks(Observer):
    """The async commit hooks (the inspector's live pages poke their followers with one), each
    started as a task of its own after the commit: a slow or failing hook holds up nothing."""

    def __init__(self, hooks: Iterable[CommitHook]) -> None:
        self.hooks = list(hooks)
        self._tasks: set[asyncio.Task[None]] = set()  # held until done (the loop keeps weak refs)

    def committed(self, run: RunRecord, commit: Commit) -> None:
        for hook in self.hooks:
            task = asyncio.create_task(self._call(hook, run.id, commit))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _call(hook: CommitHook, run_id: str, commit: Commit) -> None:
        try:
            await hook(run_id, commit)
        except Exception:
            logger_runner.exception("commit hook %r failed (ignored)", hook)


class WakeOnMessages(Observer):
    """Wakes the runner after a commit that sent messages: it may have created or woken a run,
    and stores don't notify their own writes."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake

    def committed(self, run: RunRecord, commit: Commit) -> None:
        if commit.messages:
            self.wake()
