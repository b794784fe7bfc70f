"""The `/api/` reads mask what a run recorded with the inspector's policy (workflows.masking),
over the cases the inspector's tests use too (tests/masking_cases.py): a run with its steps,
attempts, state, result and error, and its events. An action's result is the app's own answer and
is not masked."""

from __future__ import annotations

import json

import pytest

from tests import masking_cases
from workflows import conf
from workflows.masking import MASK, mask
from workflows.models import Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


@pytest.fixture
def leaky(settings, registry) -> str:
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.masking_cases.registry"]}
    conf.registry.cache_clear()
    run_id = masking_cases.registry.client("leaky").get_or_create(["k"]).run_id
    run_until_idle(masking_cases.registry)
    assert Run.objects.get(id=run_id).status == "failed"
    return run_id


def assert_no_secret(text: str) -> None:
    assert [secret for secret in masking_cases.hidden() if secret in text] == []
    assert all(value in text for value in masking_cases.shown())


def test_a_run_with_its_steps_attempts_and_state_is_masked(api, leaky):
    response = api.get(f"/api/runs/{leaky}")
    assert response.status_code == 200
    assert_no_secret(response.content.decode())
    run = response.json()
    steps = {s["name"]: s for s in run["steps"]}
    recorded = mask(masking_cases.payload())
    assert run["state"]["recorded"] == recorded
    assert steps["record"]["input"] == steps["record"]["output"] == recorded
    assert steps["record"]["meta"]["recorded"] == recorded
    [attempt] = steps["fail"]["attempts"]
    assert MASK in attempt["error"]["message"] and MASK in run["error"]["message"]
    assert attempt["error"]["message"] == masking_cases.masked_error_text()


def test_events_are_masked(api, leaky):
    response = api.get(f"/api/runs/{leaky}/events")
    assert response.status_code == 200
    assert_no_secret(response.content.decode())
    [leak] = [e for e in response.json()["items"] if e["event"] == "leak"]
    assert leak["data"] == mask(masking_cases.payload())


def test_the_run_list_and_repair_answers_are_masked_too(api, leaky):
    listed = api.get("/api/runs", {"workflow": "leaky"})
    assert listed.status_code == 200
    assert [secret for secret in masking_cases.hidden() if secret in listed.content.decode()] == []
    cancel = api.post(f"/api/runs/{leaky}/cancel", {"reason": "r"})  # refused, but say nothing secret
    assert cancel.status_code == 409
    replay_from = next(s for s in api.get(f"/api/runs/{leaky}").json()["steps"] if s["name"] == "record")
    replayed = api.post(f"/api/runs/{leaky}/replay", {"entry_id": replay_from["id"], "reason": "r"})
    assert replayed.status_code == 200
    assert_no_secret(replayed.content.decode())
    assert json.dumps(masking_cases.payload()["fields"]) not in replayed.content.decode()
