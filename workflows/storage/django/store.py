"""The real store: the engine's tables over Django's connection, on SQLite and PostgreSQL.

Its parts, one idea each: runs started, read and sent to (`runs`), claims and leases (`claims`),
resumed runs' history and commits (`resumes`), runners' presence (`presence`), start options
and schedules (`schedules`), operators' repairs (`repairs`), forks (`forks`) and pauses (`pauses`), all written once
over the store's connector (`paths` chooses it; `connectors`, `loop_connectors`), which says how a
call reaches the database. The hot path (commit, claim, heartbeat) is plain SQL named in `statements`, so that
a recorded step costs a handful of statements in one transaction (`writes`); reads use the ORM.
A store without database threads runs its calls in Django's thread (`DjangoThread`); a
runner's on PostgreSQL sends its step commits, claims (with the resume reads of the runs they
take), run starts and run reads from its event loop (`PostgresLoop`), on SQLite its step commits
(`SqliteLoop`).
"""

from __future__ import annotations

import functools

from django.conf import settings

from ...core.clock import AnchoredClock, Clock
from .claims import DjangoClaims
from .forks import DjangoForks
from .paths import StorePaths
from .pauses import DjangoPauses
from .presence import DjangoPresence
from .repairs import DjangoRepairs
from .resumes import DjangoResumes
from .runs import DjangoRuns
from .schedules import DjangoSchedules


class DjangoStore(
    DjangoRuns,
    DjangoClaims,
    DjangoResumes,
    DjangoPresence,
    DjangoSchedules,
    DjangoRepairs,
    DjangoForks,
    DjangoPauses,
    StorePaths,
):
    """With no `db_threads` its calls run in Django's sync thread (`sync_to_async`), sharing the
    caller's connection and transaction, as tests and views need. A runner gives it a pool of
    database threads instead (one connection each): runs then wait on the database in parallel,
    and a call costs a plain executor hop. SQLite always gets one thread: it has one writer, and
    its change check (data_version) must ask the connection that writes. `connector` (a name of
    `paths.CONNECTORS`, or a factory such as a connector class) overrides the default, which
    WORKFLOWS["CONNECTOR"] may name for a runner's store (benchmarks, diagnosis)."""

    @property
    def shared_clock(self) -> Clock:
        """The database's clock (`Store.shared_clock`), one for the process (every Django store
        reads the same database), unless `WORKFLOWS["CLOCK"]` is "local": this host's wall clock,
        as before the engine took shared decisions on the database's (for one host only, or to
        see the multi-host tests fail)."""
        choice = getattr(settings, "WORKFLOWS", {}).get("CLOCK", "database")
        if choice == "local":
            return _LOCAL_CLOCK
        if choice != "database":
            raise ValueError(f'WORKFLOWS["CLOCK"] must be "database" or "local", not {choice!r}')
        return _database_clock()


_LOCAL_CLOCK = Clock()


@functools.cache
def _database_clock() -> AnchoredClock:
    """The process's reading of the database's time (any Django store reads it the same way)."""
    store = DjangoStore()
    return AnchoredClock(store.database_time, store.adatabase_time)
