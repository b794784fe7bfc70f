"""GET /api/runs/{id} carries the run's `cost`: its model calls' tokens by model and by step and,
where WORKFLOWS["MODEL_PRICES"] prices them, what they cost; null when no step recorded usage."""

from __future__ import annotations

import pytest

from tests.inspector import cost_flows
from tests.inspector.cost_flows import priced_registry  # noqa: F401 (a fixture)
from workflows import conf
from workflows.testing import run_until_idle

pytestmark = pytest.mark.usefixtures("priced_registry")


def run_id(api, workflow: str) -> str:
    response = api.post(f"/api/workflows/{workflow}/runs", {"key": ["k"]})
    assert response.status_code == 201, response.content
    run_until_idle(cost_flows.registry)
    return response.json()["id"]


def test_run_read__cost_by_model_and_by_step(api):
    body = api.get(f"/api/runs/{run_id(api, 'drafted')}").json()
    cost = body["cost"]
    assert cost["cost_usd"] == pytest.approx(cost_flows.RUN_COST)
    assert (cost["calls"], cost["tokens"], cost["unpriced_tokens"], cost["complete"]) == (3, 5242, 42, False)
    mini = cost["by_model"][0]
    assert (mini["model"], mini["priced_as"], mini["input_tokens"], mini["output_tokens"]) == (
        "gpt-4o-mini-2024-07-18",
        "gpt-4o-mini",
        2000,
        1000,
    )
    local = next(m for m in cost["by_model"] if m["model"] == "local-llm")
    assert (local["cost_usd"], local["priced_as"], local["unpriced_tokens"]) == (None, None, 42)
    assert [s["step"] for s in cost["by_step"]] == ["draft", "review", "tag"]
    assert cost["by_step"][1]["cost_usd"] == pytest.approx(0.007)


def test_run_read__no_usage_no_cost_and_unsplit_tokens_unpriced(api, settings):
    body = api.get(f"/api/runs/{run_id(api, 'tagged')}").json()
    assert body["cost"]["cost_usd"] is None and body["cost"]["unsplit_tokens"] == 50
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.api.flows.registry"]}
    conf.registry.cache_clear()
    response = api.post("/api/workflows/approval/runs", {"key": ["plain"]})
    assert api.get(f"/api/runs/{response.json()['id']}").json()["cost"] is None


def test_openapi__documents_the_cost(api):
    schemas = api.get("/api/openapi.json").json()["components"]["schemas"]
    assert (
        "cost" in schemas["RunDetailOut"]["properties"] and "by_model" in schemas["RunCostOut"]["properties"]
    )
