"""Shared fixtures. Tests run on whatever DATABASE_URL names (SQLite file by default)."""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(config, items):
    """Browser tests need Debian's chromium; CI (REQUIRE_BROWSER=1) fails rather than skips."""
    if shutil.which("chromium") or os.environ.get("REQUIRE_BROWSER") == "1":
        return
    skip = pytest.mark.skip(reason="chromium not installed (apt-get install chromium)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _close_engine_thread_connections():
    """The engine's store runs ORM calls in asgiref's single sync thread; close that thread's
    connection after each test so test databases can be flushed and dropped."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
