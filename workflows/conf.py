"""Settings of the engine, read when used (never at import), and the registries they name."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from .definition import Registry
    from .store import Store


def lease_seconds() -> float:
    """How long a run stays held after the runner's last heartbeat."""
    return float(getattr(settings, "WORKFLOWS_LEASE_SECONDS", 30.0))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "WORKFLOWS_HEARTBEAT_SECONDS", lease_seconds() / 3))


@cache
def registry() -> Registry:
    """Every workflow of every registry in WORKFLOWS_REGISTRIES, merged (names must not clash)."""
    from .definition import Registry

    merged = Registry({})
    for path in getattr(settings, "WORKFLOWS_REGISTRIES", []):
        merged = merged.merged(import_string(path))
    return merged


@cache
def default_store() -> Store:
    from .django_store import DjangoStore

    return DjangoStore()


def commit_hooks() -> list:
    """The async `hook(run_id, commit)` callables named by WORKFLOWS_COMMIT_HOOKS."""
    return [import_string(path) for path in getattr(settings, "WORKFLOWS_COMMIT_HOOKS", [])]
