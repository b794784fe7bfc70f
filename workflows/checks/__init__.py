"""System checks of the workflows app and of what the inspector app needs (`manage.py check`
runs them, and so does every command that checks, such as `migrate` and `runserver`).

Settings (`settings.WORKFLOWS`, see workflows/conf.py):
    workflows.E001  WORKFLOWS is not a dict
    workflows.E002  WORKFLOWS has a key this version does not know (a typo is never ignored)
    workflows.E003  a REGISTRIES path does not import
    workflows.E004  a REGISTRIES path names something that is not a `workflows.Registry`
    workflows.E005  two registries name the same workflow
    workflows.E006  a COMMIT_HOOKS or RUNNER_LIFESPAN path does not import, or names something
                    not callable
    workflows.E007  a duration is not a positive number, or HEARTBEAT_SECONDS >= LEASE_SECONDS
    workflows.E008  REGISTRIES, COMMIT_HOOKS or RUNNER_LIFESPAN is not a list of dotted paths
    workflows.E009  RUN_STREAM_AUTH is not "token", "session" or "open"
    workflows.E016  TRACE_URL is not a URL with `{trace_id}` in it
    workflows.E020  RETENTION is not a dict of days (>= 0 or None) by status and "audited"
    workflows.E021  PRUNE_BATCH, MAX_VALUE_BYTES or MAX_STREAM_BYTES is not a positive integer (the limits
                    may be None: no limit)
    workflows.E022  CLOCK is not "database" or "local"
    workflows.W005  CLOCK is "local" or STALL_CHECK is off: a multi-host protection is switched off
    workflows.E024  MODEL_PRICES is not a dict of {"input": USD, "output": USD} (per million
                    tokens, numbers >= 0) by model name
    workflows.E023  CONNECTOR names no connector, or one for another database
    workflows.W006  a retired key (ASYNC_COMMITS, GROUP_COMMIT, ASYNC_CLAIMS) is set: it is
                    ignored; CONNECTOR replaces it
    workflows.W001  an old flat setting (WORKFLOWS_REGISTRIES, ...) is set: it is no longer read
    workflows.W002  REGISTRIES is empty and no TASKS backend is a DurableBackend: nothing to run
Metrics:
    workflows.E014  METRICS_TOKEN is neither None nor a string
    workflows.E015  PROMETHEUS_MULTIPROC_DIR is set but is not a writable directory
Database:
    workflows.W003  SQLite without `"transaction_mode": "IMMEDIATE"` in OPTIONS
    workflows.W004  (printed by `runworkflows` at start, not a registered check) SQLite, and
                    another runner holds live leases: SQLite serves one runner well, not several
                    (a dead runner of this host does not count: the new runner takes it over)
    workflows.E013  (raised by `runworkflows` at start) PostgreSQL with a connection pool too
                    small for the runner's database threads and sync steps: it would starve
The inspector app (when installed):
    workflows.E010  channels does not import (the live pages' WebSocket consumers need it)
    workflows.E011  CHANNEL_LAYERS has no "default" layer (the consumers join groups on it)
    workflows.W010  ASGI_APPLICATION is not set (no WebSocket for the live pages under runserver)
    workflows.E012  the inspector is installed without workflows: raised as ImproperlyConfigured
                    by InspectorConfig while Django loads the apps, since checks never run then
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from .. import conf
from ..core.costs import PriceTable
from ..core.retention import Retention
from ..engine.registry import Registry
from .base import DOCS, TAG
from .database import check_sqlite, runner_pool_size_needed, runner_pool_too_small, sqlite_shared_runners
from .inspector import check_inspector
from .storage import check_store_settings

OLD_NAMES = {
    "WORKFLOWS_REGISTRIES": "REGISTRIES",
    "WORKFLOWS_LEASE_SECONDS": "LEASE_SECONDS",
    "WORKFLOWS_HEARTBEAT_SECONDS": "HEARTBEAT_SECONDS",
    "WORKFLOWS_COMMIT_HOOKS": "COMMIT_HOOKS",
    "INSPECTOR_POLL_SECONDS": "POLL_SECONDS",
}


def register() -> None:
    """Called by WorkflowsConfig.ready."""
    for check in (
        check_settings,
        check_registries,
        check_commit_hooks,
        check_metrics,
        check_sqlite,
        check_inspector,
    ):
        checks.register(check, TAG)


# --- settings -----------------------------------------------------------------------------------


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(settings, "WORKFLOWS", {})
    if not isinstance(raw, Mapping):
        return [
            checks.Error(
                f"WORKFLOWS must be a dict, not {type(raw).__name__}.",
                hint=f"Keys: {', '.join(conf.DEFAULTS)}.",
                id="workflows.E001",
            )
        ]
    errors: list[checks.CheckMessage] = []
    unknown = sorted(str(k) for k in raw if k not in conf.DEFAULTS and k not in conf.RETIRED)
    if unknown:
        errors.append(
            checks.Error(
                f"WORKFLOWS has unknown key(s): {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(conf.DEFAULTS)} (each documented in workflows/conf.py).",
                id="workflows.E002",
            )
        )
    for old, new in OLD_NAMES.items():
        if hasattr(settings, old):
            errors.append(
                checks.Warning(
                    f"The setting {old} is no longer read.",
                    hint=f'Set WORKFLOWS["{new}"] instead.',
                    id="workflows.W001",
                )
            )
    errors += _check_durations(raw)
    stream_auth = raw.get("RUN_STREAM_AUTH", conf.DEFAULTS["RUN_STREAM_AUTH"])
    if stream_auth not in ("token", "session", "open"):
        errors.append(
            checks.Error(
                f'WORKFLOWS["RUN_STREAM_AUTH"] must be "token", "session" or "open", not {stream_auth!r}.',
                hint="Who may follow a run's WebSocket; see workflows/conf.py.",
                id="workflows.E009",
            )
        )
    errors += _check_protections(raw)
    errors += check_store_settings(raw)
    trace_url = raw.get("TRACE_URL")
    if trace_url is not None and not (
        isinstance(trace_url, str)
        and trace_url.startswith(("http://", "https://"))
        and "{trace_id}" in trace_url
    ):
        errors.append(
            checks.Error(
                f'WORKFLOWS["TRACE_URL"] must be an http(s) URL with "{{trace_id}}" in it, not {trace_url!r}.',
                hint='e.g. "https://tempo.example/trace/{trace_id}"; leave it out to show trace ids as text.',
                id="workflows.E016",
            )
        )
    errors += _check_retention(raw)
    errors += _check_model_prices(raw)
    for key in ("REGISTRIES", "COMMIT_HOOKS", "RUNNER_LIFESPAN"):
        value = raw.get(key, [])
        if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
            errors.append(
                checks.Error(
                    f'WORKFLOWS["{key}"] must be a list of dotted paths (strings), not {value!r}.',
                    id="workflows.E008",
                )
            )
    return errors


def _check_protections(raw: Mapping) -> list[checks.CheckMessage]:
    """The one clock and the stall check keep runners on many hosts from running a step twice;
    switching either off is for a single host, or to see the multi-host tests fail."""
    clock = raw.get("CLOCK", conf.DEFAULTS["CLOCK"])
    if clock not in ("database", "local"):
        return [
            checks.Error(
                f'WORKFLOWS["CLOCK"] must be "database" or "local", not {clock!r}.',
                hint="The clock of decisions runners must agree on; see workflows/conf.py.",
                id="workflows.E022",
            )
        ]
    if clock == "local" or not raw.get("STALL_CHECK", True):
        return [
            checks.Warning(
                'WORKFLOWS["CLOCK"] is "local" or WORKFLOWS["STALL_CHECK"] is off: runners on hosts'
                " whose clocks disagree, or that pause past their lease, may run a step twice.",
                hint="Leave both at their defaults unless every runner runs on one host.",
                id="workflows.W005",
            )
        ]
    return []


def _check_durations(raw: Mapping) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    values: dict[str, float] = {}
    for key in (
        "LEASE_SECONDS",
        "HEARTBEAT_SECONDS",
        "POLL_SECONDS",
        "RUN_STREAM_TOKEN_SECONDS",
        "PRUNE_SECONDS",
        "DOCTOR_SECONDS",
        "BULK_SECONDS",
    ):
        value = raw.get(key)
        if value is None and key != "LEASE_SECONDS":
            continue  # derived from the others (see conf.py)
        value = conf.DEFAULTS[key] if value is None else value
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            errors.append(
                checks.Error(
                    f'WORKFLOWS["{key}"] must be a positive number of seconds, not {value!r}.',
                    id="workflows.E007",
                )
            )
        else:
            values[key] = float(value)
    if "LEASE_SECONDS" in values and values.get("HEARTBEAT_SECONDS", 0) >= values["LEASE_SECONDS"]:
        errors.append(
            checks.Error(
                f'WORKFLOWS["HEARTBEAT_SECONDS"] ({values["HEARTBEAT_SECONDS"]:g}) must be shorter than '
                f'WORKFLOWS["LEASE_SECONDS"] ({values["LEASE_SECONDS"]:g}): leases would lapse between heartbeats.',
                hint="Leave HEARTBEAT_SECONDS out: it defaults to a third of LEASE_SECONDS.",
                id="workflows.E007",
            )
        )
    return errors


def _check_retention(raw: Mapping) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    try:
        Retention.from_setting(raw.get("RETENTION"))
    except ValueError as exc:
        errors.append(
            checks.Error(
                f'WORKFLOWS["RETENTION"] {exc}.',
                hint='e.g. {"completed": 30, "cancelled": 30, "failed": 90, "audited": 365} (days).',
                id="workflows.E020",
            )
        )
    for key in ("PRUNE_BATCH", "BULK_BATCH", "MAX_VALUE_BYTES", "MAX_STREAM_BYTES"):
        value = raw.get(key, conf.DEFAULTS[key])
        if value is None and key not in ("PRUNE_BATCH", "BULK_BATCH"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(
                checks.Error(
                    f'WORKFLOWS["{key}"] must be a positive integer, not {value!r}.', id="workflows.E021"
                )
            )
    return errors


def _check_model_prices(raw: Mapping) -> list[checks.CheckMessage]:
    try:
        PriceTable.from_setting(raw.get("MODEL_PRICES"))
    except ValueError as exc:
        return [
            checks.Error(
                f'WORKFLOWS["MODEL_PRICES"] {exc}.',
                hint='USD per million tokens by model, e.g. {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}.',
                id="workflows.E024",
            )
        ]
    return []


def _paths(key: str) -> list[str]:
    raw = conf.user_settings()
    value = raw.get(key, [])
    if not isinstance(value, list | tuple):
        return []  # E008
    return [p for p in value if isinstance(p, str)]


def check_registries(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    paths = _paths("REGISTRIES")
    if not paths:
        from .. import tasks  # the tasks backend serves its own workflow without a registry

        if tasks.durable_backend_configured():
            return []
        return [
            checks.Warning(
                'WORKFLOWS["REGISTRIES"] is empty: the runner, the API and the inspector know no workflow.',
                hint='List the dotted path of each Registry, e.g. WORKFLOWS = {"REGISTRIES": ["myapp.workflows.registry"]}.',
                id="workflows.W002",
            )
        ]
    errors: list[checks.CheckMessage] = []
    owners: dict[str, str] = {}
    for path in paths:
        try:
            found = import_string(path)
        except Exception as exc:  # ImportError, or any error raised while the module imports
            errors.append(
                checks.Error(
                    f'WORKFLOWS["REGISTRIES"] names {path!r}, which does not import: '
                    f"{type(exc).__name__}: {exc}",
                    hint="A dotted path to a module-level Registry, e.g. 'myapp.workflows.registry' "
                    "(made with workflows.setup(use={...})).",
                    id="workflows.E003",
                )
            )
            continue
        if not isinstance(found, Registry):
            errors.append(
                checks.Error(
                    f'WORKFLOWS["REGISTRIES"] names {path!r}, which is a {type(found).__name__}, not a workflows.Registry.',
                    hint="Point it at the object workflows.setup(use={...}) returns.",
                    id="workflows.E004",
                )
            )
            continue
        for name in found.names():
            if name in owners:
                errors.append(
                    checks.Error(
                        f"The workflow {name!r} is registered by both {owners[name]!r} and {path!r}.",
                        hint="A workflow name is served by one registry only.",
                        id="workflows.E005",
                    )
                )
            owners.setdefault(name, path)
    return errors


def check_commit_hooks(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """COMMIT_HOOKS and RUNNER_LIFESPAN name callables: each must import and be one."""
    hints = {
        "COMMIT_HOOKS": "A dotted path to an async function hook(run_id, commit).",
        "RUNNER_LIFESPAN": "A dotted path to a callable returning an async context manager "
        "(e.g. a function decorated with contextlib.asynccontextmanager).",
    }
    errors: list[checks.CheckMessage] = []
    for key, hint in hints.items():
        for path in _paths(key):
            try:
                named = import_string(path)
            except Exception as exc:
                problem = f"which does not import: {type(exc).__name__}: {exc}"
            else:
                if callable(named):
                    continue
                problem = f"which is a {type(named).__name__}, not callable"
            errors.append(
                checks.Error(f'WORKFLOWS["{key}"] names {path!r}, {problem}.', hint=hint, id="workflows.E006")
            )
    return errors


def check_metrics(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The /metrics token, and prometheus-client's multiprocess directory: when it is named but
    missing, every process would fail to write its metrics and /metrics to read them."""
    errors: list[checks.CheckMessage] = []
    token = conf.user_settings().get("METRICS_TOKEN")
    if token is not None and not isinstance(token, str):
        errors.append(
            checks.Error(
                f'WORKFLOWS["METRICS_TOKEN"] must be a string or None, not {type(token).__name__}.',
                hint="The bearer token GET /metrics requires; None (or empty) leaves it open.",
                id="workflows.E014",
            )
        )
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and not (os.path.isdir(directory) and os.access(directory, os.W_OK)):
        errors.append(
            checks.Error(
                f"PROMETHEUS_MULTIPROC_DIR names {directory!r}, which is not a writable directory.",
                hint="Create it (empty) before the web and the runners start, or unset the variable.",
                id="workflows.E015",
            )
        )
    return errors


__all__ = [
    "DOCS",
    "OLD_NAMES",
    "TAG",
    "check_commit_hooks",
    "check_inspector",
    "check_metrics",
    "check_registries",
    "check_settings",
    "check_sqlite",
    "register",
    "runner_pool_size_needed",
    "runner_pool_too_small",
    "sqlite_shared_runners",
]
