"""Checks of the settings that choose how a runner's store reaches the database: CONNECTOR
(workflows.E023) and the retired switches it replaced (workflows.W006)."""

from __future__ import annotations

from collections.abc import Mapping

from django.core import checks
from django.db import connection

from .. import conf


def check_store_settings(raw: Mapping) -> list[checks.CheckMessage]:
    """A CONNECTOR that names no connector, or one for another database, is an error (the
    runner's store would refuse to build); a retired key still set is a warning: it is ignored."""
    from ..storage.django.paths import connector_problem  # the models load once apps are ready

    found: list[checks.CheckMessage] = []
    problem = connector_problem(raw.get("CONNECTOR", conf.DEFAULTS["CONNECTOR"]), connection.vendor)
    if problem:
        found.append(
            checks.Error(
                problem,
                hint='Leave it out ("auto") unless you are benchmarking or diagnosing; see workflows/conf.py.',
                id="workflows.E023",
            )
        )
    for key, replacement in conf.RETIRED.items():
        if key in raw:
            found.append(
                checks.Warning(
                    f'WORKFLOWS["{key}"] is retired and ignored.',
                    hint=f"Remove it; {replacement} replaces it.",
                    id="workflows.W006",
                )
            )
    return found
