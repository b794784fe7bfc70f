"""Settings of the engine, read when used (never at import), and what they name: the registries,
the store, the commit hooks. `WorkflowsConfig.ready` hands these to the engine as its defaults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections
from django.utils.module_loading import import_string

from .engine.definition import Registry

if TYPE_CHECKING:
    from .core.records import Commit
    from .storage.django import DjangoStore


def lease_seconds() -> float:
    """How long a run stays held after the runner's last heartbeat."""
    return float(getattr(settings, "WORKFLOWS_LEASE_SECONDS", 30.0))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "WORKFLOWS_HEARTBEAT_SECONDS", lease_seconds() / 3))


@cache
def registry() -> Registry:
    """Every workflow of every registry in WORKFLOWS_REGISTRIES, merged (names must not clash)."""
    merged = Registry({})
    for path in getattr(settings, "WORKFLOWS_REGISTRIES", []):
        merged = merged.merged(import_string(path))
    return merged


@cache
def default_store() -> DjangoStore:
    from .storage.django import DjangoStore  # the models load only once the app registry is ready

    return DjangoStore()


def commit_hooks() -> list[Callable[[str, Commit], Awaitable[None]]]:
    """The async `hook(run_id, commit)` callables named by WORKFLOWS_COMMIT_HOOKS."""
    return [import_string(path) for path in getattr(settings, "WORKFLOWS_COMMIT_HOOKS", [])]


def run_sync_step(fn: Callable[[Any], Any], step: Any) -> Any:
    """A sync step body runs in a worker thread that keeps its own database connection between
    steps: close it when stale or past CONN_MAX_AGE before and after, as Django's request cycle
    does, so a long-lived runner never uses a connection the server dropped."""
    close_old_connections()
    try:
        return fn(step)
    finally:
        close_old_connections()
