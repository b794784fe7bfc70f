"""`workflow(..., on_repair=fn)`: called when an operator's replay or retry now is accepted, its
state change and events committed with the repair; an error in it changes nothing of the repair."""

from __future__ import annotations

import pytest

from workflows import CriticalError, conf, event, operations, setup, workflow
from workflows.models import AuditEntry, Entry, Event, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

HEARD: list = []


async def body(ctx):
    def call(step):
        raise CriticalError("nope")

    return await ctx.step("call", call)


def on_repair(c, repair):
    HEARD.append(repair)
    if repair.reason == "boom":
        raise RuntimeError("on_repair broke")
    c.state["error"] = None
    c.broadcast("note", {"repaired": repair.action})


def on_error(c, ev):
    if ev.step is not None:
        c.state["error"] = ev.step.error["message"]


REGISTRY = setup(use={"wf": workflow(body, on_error=on_error, on_repair=on_repair, events={"note": event()})})


@pytest.fixture
def failed(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.integration.test_on_repair.REGISTRY"]}
    conf.registry.cache_clear()
    HEARD.clear()
    run_id = REGISTRY.client("wf").get_or_create(["k"]).run_id
    run_until_idle(REGISTRY)
    run = Run.objects.get(id=run_id)
    assert run.status == "failed" and run.state["error"] == "nope"
    yield run
    conf.registry.cache_clear()


def test_replay_calls_on_repair_and_commits_its_state_and_events(failed):
    call = Entry.objects.get(run=failed, name="call")
    operations.replay_from(str(failed.id), call.id, actor="ops", reason="fixed")

    [repair] = HEARD
    assert (repair.action, repair.step, repair.actor, repair.reason) == ("replay", "call", "ops", "fixed")
    run = Run.objects.get(id=failed.id)
    assert run.status == "pending" and run.state["error"] is None
    assert list(Event.objects.filter(run=failed, name="note").values_list("payload", flat=True)) == [
        {"repaired": "replay"}
    ]


def test_an_error_in_on_repair_is_logged_and_the_repair_stands(failed, caplog):
    call = Entry.objects.get(run=failed, name="call")
    operations.replay_from(str(failed.id), call.id, actor="ops", reason="boom")

    run = Run.objects.get(id=failed.id)
    assert run.status == "pending" and run.state["error"] == "nope"  # unchanged by on_repair
    assert AuditEntry.objects.get(run=failed).action == "replay"
    assert "on_repair of wf" in caplog.text and "on_repair broke" in caplog.text


def test_an_async_on_repair_is_refused_at_declaration():
    async def later(c, repair):
        pass

    with pytest.raises(TypeError, match="on_repair must be a plain function"):
        workflow(body, on_repair=later)
