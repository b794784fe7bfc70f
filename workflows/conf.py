"""Settings of the engine and the inspector, read when used (never at import), and what they
name: the registries, the store, the commit hooks. `WorkflowsConfig.ready` hands these to the
engine as its defaults; `workflows/checks/` checks them (`manage.py check`).

Every setting lives in one dict, `settings.WORKFLOWS`; each key is optional:

    WORKFLOWS = {
        "REGISTRIES": ["myapp.workflows.registry"],
    }

REGISTRIES (default `[]`)
    Dotted paths of the `workflows.Registry` objects (`workflows.setup(use={...})`) that the
    runner, the API and the inspector serve. Their workflows are merged; a name must not appear
    in two registries.
LEASE_SECONDS (default `30`)
    How long a run stays held after its runner's last heartbeat; another runner resumes it once
    the lease lapses (a killed runner's runs wait this long).
HEARTBEAT_SECONDS (default `None`: a third of LEASE_SECONDS)
    How often a runner extends the leases of the runs it executes; shorter than LEASE_SECONDS.
CLOCK (default `"database"`)
    The clock of every decision two processes must agree on (lease expiry, due times, claims,
    schedule fires, limiter windows, runner death): `"database"`, the database server's time,
    read by each process now and then and carried forward on its monotonic clock, so hosts whose
    wall clocks disagree by minutes still agree. `"local"`: each host's own wall clock, as before
    (safe only on one host; kept to show the multi-host tests failing without the protection).
STALL_CHECK (default `True`)
    A runner starts no step for a run unless its last successful heartbeat of that run is younger
    than the lease (on a clock that counts while the process is stopped): a runner that was paused
    or cut off from the database past its lease starts nothing more for the runs it held. `False`
    only to show the multi-host tests failing without it.
COMMIT_HOOKS (default `[]`)
    Dotted paths of async callables `hook(run_id, commit)` the runner awaits after each commit.
    `"inspector.live.on_commit"` pokes the inspector's live pages through the channel layer: set
    it with a cross-process layer (channels-redis); with the in-memory layer a poke never leaves
    the runner's process, so it is useless there.
RUNNER_LIFESPAN (default `[]`)
    Dotted paths of zero-argument callables returning an async context manager that
    `runworkflows` enters before its runner's first claim and exits after the runner stopped and
    drained (ASGI's lifespan, for a runner): resources its steps share for the runner's life,
    such as HTTP clients whose connections outlive one step. The runner's tasks start inside it,
    so a context variable it sets is seen by every step the runner executes.
OBSERVERS (default: the activity log lines, the OpenTelemetry spans and the Prometheus metrics, see
    DEFAULT_OBSERVERS)
    Dotted paths of `workflows.engine.observers.Observer` instances (or zero-argument callables
    that return one) the runner tells of each execution, commit and its own load: traces,
    metrics and log lines are observers. Each is called in line on the runner's loop: cheap,
    never blocking. `[]` turns them all off; setting the key replaces the list, so keep
    `workflows.telemetry.metrics.observer` in it to keep the metrics.
TRACE_URL (default `None`)
    The inspector's: a URL with `{trace_id}` (e.g. `"https://tempo.example/trace/{trace_id}"`);
    a run's page then links its trace id to it. Unset: the trace id is shown as text.
METRICS_TOKEN (default `None`)
    When set, `GET /metrics` (`workflows.http.metrics.metrics_view`) answers only
    requests with `Authorization: Bearer <token>` (others get a plain 401); unset, it is open
    to whoever reaches it (a Prometheus scraping inside the network).
POLL_SECONDS (default `None`: 0.5 with the in-memory channel layer, 2.0 with any other)
    The inspector's: how often a live page's WebSocket consumer re-reads the database besides
    the pokes it gets.
RUN_STREAM_AUTH (default `"token"`)
    The inspector's: who may follow a run's WebSocket (`ws/runs/<run_id>/`). `"token"`: a session
    that may view runs (`workflows.view_run`), or `?token=` a signed token bound to the run id
    (`inspector.access.run_stream_token`; the example app's `/jobs` hands them out); `"session"`:
    only such a session; `"open"`: anyone who knows the run id. Payloads are masked in every mode.
RUN_STREAM_TOKEN_SECONDS (default `3600`)
    The inspector's: how old a run stream token may be when a client connects with it (an open
    stream is not cut when its token ages).
JSON_ERROR_PREFIXES (default `["/api/", "/jobs"]`)
    The URL prefixes under which `workflows.http.JsonErrorsMiddleware` answers every error
    (unknown URL, wrong method, a crash) as JSON of the API's one shape.
RETENTION (default `{}`: every run is kept forever)
    Days a finished run is kept, by status, e.g. `{"completed": 30, "cancelled": 30, "failed":
    90}`; then `manage.py prune` and the runner delete it with its whole history (entries,
    attempts, messages, events, audit entries). `"audited"` (default 365): a run an operator
    acted on is also kept that many days after its latest audit entry (`None`: forever). A
    status left out, or `None`, is kept forever. See `workflows.core.retention`.
PRUNE_SECONDS (default `600`)
    How often each runner prunes by RETENTION (one runner at a time on PostgreSQL; never when
    RETENTION prunes nothing); `None` leaves pruning to `manage.py prune`.
DOCTOR_SECONDS (default `300`)
    How often each runner runs the doctor's cheap checks (`manage.py workflows doctor`) and sets
    the `workflows_doctor_findings` gauge; `None`: never.
BULK_SECONDS (default `2`)
    How often each runner looks for a bulk operation to execute (`workflows.bulk`); `None`:
    never (then only `manage.py workflows bulk` executes the operations it starts).
BULK_BATCH (default `200`)
    Runs a bulk operation acts on per transaction (an abort is seen between two batches).
BULK_PACE_SECONDS (default `10`)
    Before its next batch, a bulk operation waits until a live runner has taken up most of the
    runs its last batch made due, so other runs' steps never queue behind thousands of them; it
    stops waiting for the rest of the operation when the runners take up none for this long.
    `0`: no pacing.
PRUNE_BATCH (default `100`)
    Runs deleted per transaction when pruning: short transactions that never hold up a runner.
MAX_VALUE_BYTES (default `1048576`, 1 MiB)
    The largest value recorded, as compact JSON text: a step's input or output, the state, a
    message body, an event, a result. A bigger one is refused (`ValueTooLarge`): a step fails
    at once naming itself and the size, `send` raises and stores nothing, the API answers 413.
    `None`: no limit.
MAX_STREAM_BYTES (default `16777216`, 16 MiB)
    The most one step attempt writes to one stream (`step.stream`), in bytes of its chunks'
    compact JSON; one chunk is a value (MAX_VALUE_BYTES). A write over it raises
    `ValueTooLarge`: the step fails at once, naming itself, and the refused chunk is not stored.
    `None`: no limit.
PREPARED_STATEMENTS (default `True`)
    PostgreSQL: the store's hot statements (a step's commit, a claim, a run's creation and read)
    are prepared once per connection and then executed by name, planned once. `False` behind a
    pooler that cannot keep prepared statements (PgBouncer in transaction mode before 1.21).
CONNECTOR (default `"auto"`)
    How a runner's store reaches the database (`workflows/storage/django/connectors.py`), for
    benchmarks and diagnosis: `"auto"` chooses by the database: on PostgreSQL "postgres-loop"
    (step commits, grouped, from the runner's event loop on a connection of its own; claims with
    the resume reads of the runs they take, resumed runs' reads, run starts and run reads on
    another), on SQLite "sqlite-loop" (step commits and the change check from the event loop on
    a connection of its own while the one database thread is idle). "postgres-threads": every
    call through the database threads, step commits grouped there. "threads": every call through
    the database threads, nothing grouped. A store without database threads (a view's, a test's)
    uses Django's thread whatever this says (but see ASYNC_CONNECTIONS). Read when the store is built.
ASYNC_CONNECTIONS (default `4`)
    PostgreSQL: how many connections of its own the process's default store (a web server's; not
    a runner's) opens, from the event loop, for the async starts and reads an async view makes
    (`await client.aget_or_create(...)`, `aget`): one round trip each, with no hop to a thread and
    no pool checkout. Opened on first use; while all are busy, or with `0`, those calls go through
    Django's thread. They see only committed rows: an async call never joins the caller's
    transaction (a sync one does). Read when the store is built.
ASYNC_COMMITS, GROUP_COMMIT, ASYNC_CLAIMS (retired)
    No longer read (`manage.py check` warns, workflows.W006): CONNECTOR chooses the paths they
    switched ("postgres-threads" for ASYNC_COMMITS off, "threads" for both off).
MODEL_PRICES (default `{}`: no prices, tokens only)
    USD per million tokens by model name, for the cost the inspector's run page, the dashboard
    and `GET /api/runs/{id}` show of the model calls steps record (`step.meta["usage"]` and
    `step.meta["gen_ai"]`): `{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}`. A dated model
    (`gpt-4o-mini-2024-07-18`) takes the price of the longest name it extends; a model with no
    price shows its tokens only. See `workflows.core.costs`; check workflows.E024.
READ_DATABASE (default `None`: the default database)
    A Django database alias (a streaming replica of the default database) that the operators'
    list reads use: the dashboard's figures, backlog, decisions and runs (and its live list),
    the admin's run and audit lists, and `GET /api/runs` (whose answer carries `X-Data-Source`
    and `X-Data-Age`). Pages reading it say how far behind it is; when it cannot be read they
    read the default database and say so. Everything a run's correctness depends on (starts,
    sends, claims, commits, actions, a run's page and the reads before acting) stays on the
    default database. See `workflows.reads.source`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.utils.module_loading import import_string

from .core.costs import PriceTable
from .core.retention import Retention
from .engine.observers import Observer
from .engine.registry import Registry

if TYPE_CHECKING:
    from .core.records import Commit
    from .storage.django import DjangoStore

# Every runner logs its activity (logger `workflows.activity`) and traces it through the
# OpenTelemetry API: a no-op unless the process configured an SDK.
DEFAULT_OBSERVERS = [
    "workflows.telemetry.logs.ActivityLogObserver",
    "workflows.telemetry.tracing.TracingObserver",
    "workflows.telemetry.metrics.observer",
]

DEFAULTS: dict[str, Any] = {
    "REGISTRIES": [],
    "LEASE_SECONDS": 30.0,
    "HEARTBEAT_SECONDS": None,
    "CLOCK": "database",
    "STALL_CHECK": True,
    "COMMIT_HOOKS": [],
    "RUNNER_LIFESPAN": [],
    "OBSERVERS": DEFAULT_OBSERVERS,
    "TRACE_URL": None,
    "METRICS_TOKEN": None,
    "POLL_SECONDS": None,
    "RUN_STREAM_AUTH": "token",
    "RUN_STREAM_TOKEN_SECONDS": 3600.0,
    "JSON_ERROR_PREFIXES": ["/api/", "/jobs"],
    "RETENTION": {},
    "PRUNE_SECONDS": 600.0,
    "PRUNE_BATCH": 100,
    "DOCTOR_SECONDS": 300.0,
    "BULK_SECONDS": 2.0,
    "BULK_BATCH": 200,
    "BULK_PACE_SECONDS": 10.0,
    "MAX_VALUE_BYTES": 1024 * 1024,
    "MAX_STREAM_BYTES": 16 * 1024 * 1024,
    "PREPARED_STATEMENTS": True,
    "CONNECTOR": "auto",
    "ASYNC_CONNECTIONS": 4,
    "READ_DATABASE": None,
    "MODEL_PRICES": {},
}

# Keys no longer read, and what replaces each (manage.py check warns: workflows.W006).
RETIRED = {
    "ASYNC_COMMITS": 'CONNECTOR ("postgres-threads" or "threads" sends every commit through the database threads)',
    "GROUP_COMMIT": 'CONNECTOR ("threads" groups no commits)',
    "ASYNC_CLAIMS": 'CONNECTOR ("postgres-threads" sends claims and reads through the database threads)',
}


def user_settings() -> Mapping[str, Any]:
    """`settings.WORKFLOWS` as given (empty when unset; when not a dict, check workflows.E001)."""
    given = getattr(settings, "WORKFLOWS", None)
    return given if isinstance(given, Mapping) else {}


def get(name: str) -> Any:
    """`WORKFLOWS[name]`, or its default (a KeyError for a name that is no setting)."""
    default = DEFAULTS[name]
    return user_settings().get(name, default)


def lease_seconds() -> float:
    """How long a run stays held after the runner's last heartbeat."""
    return float(get("LEASE_SECONDS"))


def stall_check() -> bool:
    """Whether a runner checks its lease's age before it starts a step (STALL_CHECK)."""
    return bool(get("STALL_CHECK"))


def heartbeat_seconds() -> float:
    configured = get("HEARTBEAT_SECONDS")
    return lease_seconds() / 3 if configured is None else float(configured)


def retention() -> Retention:
    """The RETENTION policy (ValueError for a malformed one: check workflows.E020 reports it)."""
    return Retention.from_setting(get("RETENTION"))


def model_prices() -> PriceTable:
    """The MODEL_PRICES table (ValueError for a malformed one: check workflows.E024 reports it)."""
    return PriceTable.from_setting(get("MODEL_PRICES"))


def prune_seconds() -> float | None:
    """How often a runner prunes; None when it does not (no interval, or nothing to prune)."""
    seconds = get("PRUNE_SECONDS")
    return float(seconds) if seconds and retention().enabled else None


def doctor_seconds() -> float | None:
    """How often a runner runs the doctor's cheap checks; None when it does not."""
    seconds = get("DOCTOR_SECONDS")
    return float(seconds) if seconds else None


def bulk_seconds() -> float | None:
    """How often a runner looks for a bulk operation to execute; None when it does not."""
    seconds = get("BULK_SECONDS")
    return float(seconds) if seconds else None


def bulk_batch() -> int:
    return max(1, int(get("BULK_BATCH")))


def bulk_pace_seconds() -> float:
    """How long a bulk operation waits for the runners to take up its last batch's runs before
    it stops pacing itself to them (workflows.bulk.pacing); 0: it never waits."""
    return float(get("BULK_PACE_SECONDS") or 0)


def prune_batch() -> int:
    return int(get("PRUNE_BATCH"))


def max_stream_bytes() -> int | None:
    """The most one step attempt writes to one stream, in bytes (None: no limit)."""
    limit = get("MAX_STREAM_BYTES")
    return None if limit is None else int(limit)


def max_value_bytes() -> int | None:
    """The largest recorded value, in bytes of compact JSON (None: no limit)."""
    limit = get("MAX_VALUE_BYTES")
    return None if limit is None else int(limit)


@cache
def registry() -> Registry:
    """Every workflow of every registry in WORKFLOWS["REGISTRIES"], merged (names must not clash),
    and the built-in `django.task` workflow when settings.TASKS names a DurableBackend."""
    merged = Registry({})
    for path in get("REGISTRIES"):
        merged = merged.merged(import_string(path))
    if getattr(settings, "TASKS", None) and "django.task" not in merged:
        try:
            from . import tasks  # only when asked for: it needs the django-tasks backport
        except ImportError:  # no backport installed: no DurableBackend can be configured either
            return merged
        if tasks.durable_backend_configured():  # the runner serves the tasks' built-in workflow
            merged = merged.merged(tasks.registry)
    return merged


def _forget_registry(*, setting: str, **kwargs: Any) -> None:
    """A test that overrides WORKFLOWS gets the registries it names (and its own afterwards)."""
    if setting in ("WORKFLOWS", "TASKS"):
        registry.cache_clear()


setting_changed.connect(_forget_registry, dispatch_uid="workflows.conf.forget_registry")


@cache
def default_store() -> DjangoStore:
    """The process's store for clients, views and commands (a runner builds its own). On
    PostgreSQL its async starts and reads go out from the event loop (ASYNC_CONNECTIONS)."""
    from django.db import connection

    from .storage.django import DjangoStore  # the models load only once the app registry is ready
    from .storage.django.connectors import pipelines
    from .storage.django.loop_connectors import DjangoThreadLoop

    size = int(get("ASYNC_CONNECTIONS") or 0)
    if size > 0 and connection.vendor == "postgresql" and pipelines():
        return DjangoStore(connector=partial(DjangoThreadLoop, size=size))
    return DjangoStore()


def commit_hooks() -> list[Callable[[str, Commit], Awaitable[None]]]:
    """The async `hook(run_id, commit)` callables named by WORKFLOWS["COMMIT_HOOKS"]."""
    return [import_string(path) for path in get("COMMIT_HOOKS")]


def runner_lifespans() -> list[Callable[[], AbstractAsyncContextManager[Any]]]:
    """The async context manager factories named by WORKFLOWS["RUNNER_LIFESPAN"]."""
    return [import_string(path) for path in get("RUNNER_LIFESPAN")]


def observers() -> list[Observer]:
    """The observers named by WORKFLOWS["OBSERVERS"]: an instance, or a factory of one."""
    found: list[Observer] = []
    for path in get("OBSERVERS"):
        obj = import_string(path)
        found.append(obj if isinstance(obj, Observer) else obj())
    return found


def run_sync_step(fn: Callable[[Any], Any], step: Any) -> Any:
    """A sync step body runs in a worker thread that keeps its own database connection between
    steps: close it when stale or past CONN_MAX_AGE before and after, as Django's request cycle
    does, so a long-lived runner never uses a connection the server dropped."""
    close_old_connections()
    try:
        return fn(step)
    finally:
        close_old_connections()
