"""The API tests' fixtures: the test workflows as the configured registry, an API key, and a
client that sends it."""

from __future__ import annotations

import json

import pytest

from tests.api import flows
from workflows import conf
from workflows.http.auth import create_api_key


@pytest.fixture(autouse=True)
def registry(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.api.flows.registry"]}
    conf.registry.cache_clear()
    flows.FAILURES.clear()
    yield flows.registry
    flows.FAILURES.clear()
    conf.registry.cache_clear()


@pytest.fixture
def api_key(db) -> str:
    _row, key = create_api_key("tester")
    return key


class Api:
    """Django's test client with the key and JSON bodies."""

    def __init__(self, client, key: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}"}

    def get(self, path: str, params=None):
        return self.client.get(path, params or {}, headers=self.headers)

    def post(self, path: str, body=None, *, raw: str | None = None):
        data = raw if raw is not None else json.dumps({} if body is None else body)
        return self.client.post(path, data, content_type="application/json", headers=self.headers)


@pytest.fixture
def api(client, api_key) -> Api:
    return Api(client, api_key)
