"""The control-flow signals that unwind a workflow body. They are BaseExceptions, so a user's
`except Exception:` can never swallow one and keep a run going that should have stopped.

    Unwind
    ├── Suspend        the run waits: until `wake_at`, or for a message on `wait_queues`
    │   └── Frontier   a dry run (checkreplay) reached the first entry that would run
    ├── Cancelled      an operator cancelled the run: compensate, then end cancelled
    ├── Interrupted    the runner is stopping: hand the run back at its next entry
    ├── Aborted        the lease was lost: another runner owns the run; write nothing more
    └── Abandoned      the store failed (connection lost, server restarting): stop as if the
                       runner had crashed here; the runner resumes the run when the store is back
"""

from __future__ import annotations

import datetime as dt


class Unwind(BaseException):
    """Leaves the workflow body without running user `except Exception` handlers."""


class Suspend(Unwind):
    def __init__(self, wake_at: dt.datetime | None, wait_queues: tuple[str, ...] | None = None) -> None:
        self.wake_at = wake_at
        self.wait_queues = wait_queues  # None: no queue wakes it; (): any queue does


class Frontier(Suspend):
    """A Suspend, so a join branch that reaches its frontier waits while the others are checked."""

    def __init__(self, where: str) -> None:
        super().__init__(None, ())
        self.where = where


class Cancelled(Unwind):
    pass


class Interrupted(Unwind):
    pass


class Aborted(Unwind):
    pass


class Abandoned(Unwind):
    """Never a run's failure: what was committed stays, what was not is done again."""
