"""The accountAgent example, in-process until idle, against the demo services (the model through
an httpx2 MockTransport of its own, given to the OpenAI client; the CRM and CMS through the one
of the `demo` fixture). On SQLite and PostgreSQL."""

from __future__ import annotations

import httpx2
import pytest
from openai import AsyncOpenAI

from jobs import agent_workflow
from jobs.agent_workflow import registry
from jobs.demo.services import DemoRequest, DemoServices
from workflows import conf, operations
from workflows.core.streams import text_of
from workflows.models import Entry
from workflows.reads import declarations
from workflows.reads.decisions import awaiting_decision
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

QUESTION = """How big is this account? Use crm_lookup, then publish_note.
company=Acme Corp
title=Acme Corp account
body=Acme Corp is on a paid plan."""


@pytest.fixture
def model(demo: DemoServices, monkeypatch) -> DemoServices:
    def handle(request: httpx2.Request) -> httpx2.Response:
        answer = demo.handle(
            DemoRequest(method=request.method, path=request.url.path, body=request.content, host="demo.test")
        )
        body = answer.body if answer.stream is None else b"".join(answer.stream)  # a streamed answer, whole
        return httpx2.Response(answer.status, headers=answer.headers, content=body)

    def client() -> AsyncOpenAI:
        transport = httpx2.MockTransport(handle)
        return AsyncOpenAI(
            base_url="http://demo.test/v1",
            api_key="demo",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=transport),
        )

    monkeypatch.setattr(agent_workflow, "openai_client", client)
    return demo


def ask(key: str, question: str = QUESTION):
    handle = registry.client("accountAgent").get_or_create([key])
    handle.send("question", {"question": question})
    run_until_idle(registry)
    return handle


def step_names(handle) -> list[str]:
    return list(
        Entry.objects.filter(run_id=handle.run_id, superseded=False)
        .order_by("position")
        .values_list("name", flat=True)
    )


def test_the_agent_looks_up_waits_for_approval_then_publishes(model):
    handle = ask("a1")
    info = handle.info()
    assert info.status == "waiting"
    pending = info.state["pending_tool_call"]
    assert pending["tool"] == "publish_note"
    assert pending["args"] == {"title": "Acme Corp account", "body": "Acme Corp is on a paid plan."}
    assert model.calls == {"agent": 2, "crm": 1}  # publish_note waits: the CMS was not called

    handle.send("tool-approval", {"decision": "approve", "by": "ops"})
    run_until_idle(registry)
    info = handle.info()
    assert info.status == "completed", info.error
    assert model.calls == {"agent": 3, "crm": 1, "cms": 1}
    answer = info.state["answer"]
    assert answer.startswith("Done.") and "crm_lookup:" in answer and "publish_note:" in answer
    assert step_names(handle) == [
        "wait-question",
        "account:turn-1:model",
        "account:turn-1:tool:crm_lookup[0]",
        "account:turn-2:model",
        "account:turn-2:approval:publish_note[0]",
        "account:turn-2:tool:publish_note[0]",
        "account:turn-3:model",
        "record-answer",
    ]
    turn = Entry.objects.get(run_id=handle.run_id, name="account:turn-1:model")
    assert turn.meta["gen_ai"]["provider"] == "openai" and turn.meta["usage"]["input_tokens"] > 0
    # The agent streams (stream=True): the last turn's text came through the run's stream as well.
    streamed = handle.chunks("account")
    assert {c.step for c in streamed} == {"account:turn-3:model"}
    assert text_of(streamed) == answer


def test_a_denied_note_is_not_published_and_the_model_is_told(model):
    handle = ask("a2")
    handle.send("tool-approval", {"decision": "deny", "by": "ops", "note": "no notes today"})
    run_until_idle(registry)
    info = handle.info()
    assert info.status == "completed", info.error
    assert "cms" not in model.calls and model.posts == {}
    assert "publish_note: The tool call was denied by ops. Note: no notes today" in info.state["answer"]


def test_a_bad_approval_is_refused_and_changes_nothing(model):
    handle = ask("a3")
    with pytest.raises(Exception, match="decision"):
        handle.send("tool-approval", {"decision": "maybe", "by": "ops"})
    run_until_idle(registry)
    assert handle.info().status == "waiting"


def test_the_pending_call_is_an_operators_decision_in_the_inspector(model):
    handle = ask("a4")
    (decision,) = [d for d in awaiting_decision() if d.run_id == handle.run_id]
    assert decision.wait == "account:turn-2:approval:publish_note[0]"
    assert [(q.queue, q.choices) for q in decision.queues] == [("tool-approval", ["Approve", "Deny"])]
    definition = declarations.definition("accountAgent", handle.info().version)
    reviewed = dict(declarations.reviewed(definition, "tool-approval", handle.info().state))
    assert reviewed["pending_tool_call"]["tool"] == "publish_note"

    # The decision form's Deny button: its body with the signed-in operator, sent as an audited send.
    body = declarations.choice_body(definition, "tool-approval", "Deny", "alice")
    operations.send(
        handle.run_id, "tool-approval", body, registry=conf.registry(), actor="alice", reason="Deny"
    )
    run_until_idle(registry)
    assert "denied by alice" in handle.info().state["answer"]
