"""The offline demo services: deterministic answers, Idempotency-Key, and the failure knobs."""

from __future__ import annotations

import json
import threading

import httpx2
import pytest

from jobs import prompts
from jobs.demo.server import DemoServer
from jobs.demo.services import DROPPED, DemoConfig, DemoRequest, DemoServices, parse_fail_spec

from .conftest import SAMPLE, SAMPLE_COMPANIES


def chat(services: DemoServices, messages, *, json_object: bool) -> tuple[int, dict]:
    body = {"model": "demo", "messages": messages}
    if json_object:
        body["response_format"] = {"type": "json_object"}
    response = services.handle(DemoRequest("POST", "/v1/chat/completions", body=json.dumps(body).encode()))
    return response.status, json.loads(response.body)


def post(services: DemoServices, key: str, title: str = "T"):
    body = json.dumps({"title": title, "body": "B"}).encode()
    return services.handle(DemoRequest("POST", "/cms/posts", headers={"idempotency-key": key}, body=body))


def test_model__extracts_companies_and_action_items_from_the_sample():
    status, body = chat(DemoServices(), prompts.extract_messages("Call", SAMPLE), json_object=True)
    assert status == 200
    extracted = json.loads(body["choices"][0]["message"]["content"])
    assert extracted["companies"] == SAMPLE_COMPANIES
    assert extracted["actionItems"] == [
        "Send the ROI model we built for a similar carrier by Friday",
        "Set up a technical deep dive with our solutions engineer next week",
        "Prepare a pricing proposal for three hubs before the deep dive",
    ]
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_model__summarizes_from_the_facts():
    companies = [
        {"name": "Acme Corp", "found": True, "crm": {"name": "Acme Corp", "plan": "business", "seats": 10}}
    ]
    messages = prompts.summarize_messages("Call", SAMPLE, ["Send the deck"], companies)
    status, body = chat(DemoServices(), messages, json_object=False)
    brief = body["choices"][0]["message"]["content"]
    assert status == 200
    assert brief.startswith("Brief: Call.")
    assert "Acme Corp (business plan, 10 seats)" in brief and "1. Send the deck." in brief


def test_cms__the_same_idempotency_key_returns_the_same_post():
    services = DemoServices()
    first, again, other = post(services, "k1"), post(services, "k1"), post(services, "k2")
    assert (first.status, again.status, other.status) == (201, 200, 201)
    assert json.loads(first.body) == json.loads(again.body)
    assert json.loads(other.body)["id"] == 2
    assert len(services.posts) == 2


def test_scripts__answer_in_order_then_recover():
    services = DemoServices(DemoConfig(scripts=parse_fail_spec("extract=429:3,503;crm=bad-json")))
    statuses = [chat(services, prompts.extract_messages("t", "x"), json_object=True)[0] for _ in range(3)]
    assert statuses == [429, 503, 200]
    crm = services.handle(DemoRequest("GET", "/crm/companies", query={"name": "Acme Corp"}))
    with pytest.raises(ValueError):
        json.loads(crm.body)
    assert services.calls == {"extract": 3, "crm": 1}


def test_script__drop_saves_the_post_then_answers_nothing():
    services = DemoServices()
    services.script("cms", ["drop"])
    assert post(services, "k1") is DROPPED
    assert len(services.posts) == 1
    assert json.loads(post(services, "k1").body)["id"] == 1
    assert len(services.posts) == 1


def test_script__unknown_route_or_answer_is_refused():
    with pytest.raises(ValueError):
        DemoServices().script("billing", ["500"])
    with pytest.raises(ValueError):
        parse_fail_spec("extract=teapot")


def test_failure_rate__fails_that_share_with_the_given_kinds():
    services = DemoServices(DemoConfig(failure_rate=1.0, failure_kinds=("502",), seed=1))
    assert services.handle(DemoRequest("GET", "/crm/companies", query={"name": "Acme Corp"})).status == 502


def test_config__from_environment():
    config = DemoConfig.from_env(
        {"DEMO_LATENCY_MS": "5", "DEMO_FAILURE_RATE": "0.25", "DEMO_FAIL": "cms=drop", "DEMO_SEED": "3"}
    )
    assert (config.latency_ms, config.failure_rate, config.scripts, config.seed) == (
        5.0, 0.25, {"cms": ["drop"]}, 3,
    )  # fmt: skip


@pytest.fixture
def server():
    server = DemoServer(("127.0.0.1", 0), DemoServices())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_server__a_dropped_answer_closes_the_connection_after_the_post_is_saved(server):
    httpx2.post(f"{server.url}/_demo/script", json={"route": "cms", "responses": ["drop"]}).raise_for_status()
    with pytest.raises(httpx2.RemoteProtocolError):
        httpx2.post(
            f"{server.url}/cms/posts", json={"title": "T", "body": "B"}, headers={"Idempotency-Key": "k"}
        )
    again = httpx2.post(
        f"{server.url}/cms/posts", json={"title": "T", "body": "B"}, headers={"Idempotency-Key": "k"}
    )
    assert again.status_code == 200
    assert len(httpx2.get(f"{server.url}/cms/posts").json()["posts"]) == 1
    assert httpx2.get(f"{server.url}/_demo/calls").json()["counts"] == {"cms": 2}


def test_server__bad_admin_requests_are_400(server):
    response = httpx2.post(f"{server.url}/_demo/script", json={"route": "cms", "responses": ["nope"]})
    assert response.status_code == 400
    assert httpx2.post(f"{server.url}/_demo/script", content=b"[").status_code == 400
