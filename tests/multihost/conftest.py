"""Fixtures of the multi-host bed: one bed per session (namespaces, private cluster, control
process), a clean slate per test. Skipped on SQLite, and where the machine cannot build the bed
(not root, no `ip netns`, iptables or libfaketime); CI's PostgreSQL pass builds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests import pgcluster

from . import netns
from .bed import Bed


def _why_not() -> str | None:
    if connection.vendor != "postgresql":
        return "the multi-host bed runs on PostgreSQL only (set DATABASE_URL=postgres://...)"
    if not pgcluster.available():
        return "needs PostgreSQL's initdb and a postgres user for a private cluster"
    return netns.missing()


@pytest.fixture(scope="session")
def _session_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    bed = Bed(tmp_path_factory.mktemp("multihost"))
    try:
        yield bed
    finally:
        bed.destroy()
        left = netns.leftovers(bed.network.session)
        assert not left, f"the bed left namespaces or links behind: {left}"


@pytest.fixture
def bed(_session_bed: Bed, tmp_path: Path) -> Iterator[Bed]:
    _session_bed.reset(tmp_path)
    try:
        yield _session_bed
    finally:
        _session_bed.end_processes()
        for host in _session_bed.hosts.values():
            host.heal()
