"""The inspector tests' fixtures: the test workflows as the configured registry."""

from __future__ import annotations

import pytest

from tests.inspector import flows
from workflows import conf


@pytest.fixture(autouse=True)
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.inspector.flows.registry"]}
    conf.registry.cache_clear()
    flows.FAIL.clear()
    yield flows.registry
    flows.FAIL.clear()
    conf.registry.cache_clear()
