"""The decision form: a run waiting on a decision queue (`queue(..., choices=..., note=...,
shows=...)`) is decided with a form made for it: what is being approved above, one button per
declared choice, a note; `by` is the signed-in operator, as in the audit log; bad input reads as a
sentence and stores nothing. The generic send keeps the other queues."""

from __future__ import annotations

import re
from typing import Literal

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from pydantic import BaseModel, ConfigDict, Field

from workflows import conf, event, queue, setup, workflow
from workflows.engine.definition import OPERATOR
from workflows.models import AuditEntry, Message, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

BRIEF = "Northwind Logistics wants 40 seats.\nNext step: a pilot in March."


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["approve", "reject"]
    by: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=2000)


async def review_run(ctx):
    async def draft(step):
        step.state.update(title="Call with Northwind", summary=BRIEF)

    await ctx.step("draft", draft)
    verdict = await ctx.queue.next("wait-approval", names=["approval"])

    async def record(step):
        return step.input

    return await ctx.step("record-decision", record, input=verdict.body)


VERDICTS = {
    "Approve": {"decision": "approve", "by": OPERATOR},
    "Reject": {"decision": "reject", "by": OPERATOR},
}
registry = setup(
    use={
        "review": workflow(
            review_run,
            state=lambda: {"title": None, "summary": None},
            queues={
                "approval": queue(Approval, choices=VERDICTS, note="note", shows=("title", "summary")),
                "comment": queue(),
            },
            events={"progress": event()},
            labels=("title",),
            version="v1",
        )
    }
)


@pytest.fixture(autouse=True)
def registry_setting(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.inspector.test_decisions.registry"]}
    conf.registry.cache_clear()
    yield
    conf.registry.cache_clear()


def waiting(key: str = "r1") -> Run:
    handle = registry.client("review").get_or_create([key])
    run_until_idle(registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def operator(username: str = "ann", *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    codenames = ["view_run", *(perms or ("send_message",))]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def decide_url(run: Run, queue_name: str = "approval") -> str:
    return reverse("admin:workflows_run_decide", args=[run.id, queue_name])


def test_the_form_shows_what_is_approved_and_what_each_button_sends(client):
    run = waiting()
    client.force_login(operator("ann"))
    page = client.get(decide_url(run), {"choice": "Approve"}).content.decode()
    reviewed = page.split("data-reviewed")[1].split("</div>\n</div>")[0]
    assert "Call with Northwind" in reviewed and "Next step: a pilot in March." in reviewed
    assert re.findall(r'data-decide="(\w+)"', page) == ["Approve", "Reject"]
    bodies = re.findall(r"data-choice-body>([^<]+)<", page)
    assert bodies == ['{&quot;decision&quot;: &quot;approve&quot;, &quot;by&quot;: &quot;ann&quot;}',
                      '{&quot;decision&quot;: &quot;reject&quot;, &quot;by&quot;: &quot;ann&quot;}']  # fmt: skip
    assert 'name="note"' in page and 'name="by"' not in page  # who decides is not typed
    assert "woken: its open wait takes your decision" in page


def test_approve_with_a_note__by_is_the_operator_in_the_message_and_the_audit_log(client):
    run = waiting()
    client.force_login(operator("ann"))
    # A forged `by` in the form is no field of it: ignored.
    done = client.post(decide_url(run), {"choice": "Approve", "note": "  figures checked  ", "by": "mallory"})
    assert done.status_code == 302 and done["Location"].endswith(f"/{run.id}/inspect/")
    message = Message.objects.get(run=run)
    assert (message.queue, message.body) == (
        "approval",
        {"decision": "approve", "by": "ann", "note": "figures checked"},
    )
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("send", "ann", "figures checked")
    assert audit.details == {"queue": "approval", "message": message.id}
    run_until_idle(registry)
    run.refresh_from_db()
    assert run.status == "completed" and run.result["by"] == audit.actor


def test_reject_without_a_note__the_audit_reason_names_the_choice(client):
    run = waiting()
    client.force_login(operator("bo"))
    assert client.post(decide_url(run), {"choice": "Reject"}).status_code == 302
    assert Message.objects.get(run=run).body == {"decision": "reject", "by": "bo", "note": None}
    assert AuditEntry.objects.get(run=run).reason == "Reject (decision form)"


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        (
            {"choice": "Approve", "note": "x" * 2001},
            "The queue does not accept this message: note: String should have at most 2000 characters.",
        ),
        ({"choice": "Maybe"}, "“Maybe” is not one of the choices."),
        ({"note": "no button pressed"}, "Choose one of the buttons."),
    ],
)
def test_bad_input_reads_as_a_sentence_and_sends_nothing(client, data, sentence):
    run = waiting()
    client.force_login(operator("ann"))
    response = client.post(decide_url(run), data)
    page = response.content.decode()
    assert response.status_code == 200
    [alert] = re.findall(r"data-action-error>([^<]*)<", page)
    assert alert.replace("&quot;", '"').replace("&#x27;", "'") == sentence
    assert "[{" not in page and "'type'" not in page and "&#x27;type&#x27;" not in page
    assert not Message.objects.exists() and not AuditEntry.objects.exists()


def test_without_the_send_permission__403_and_a_refusal_in_the_audit_log(client):
    run = waiting()
    client.force_login(operator("viewer", "replay_run"))
    assert client.get(decide_url(run)).status_code == 403
    assert client.post(decide_url(run), {"choice": "Approve", "why": "x"}).status_code == 403
    assert not Message.objects.exists()
    [audit] = AuditEntry.objects.filter(run=run)
    assert audit.action == "refused" and audit.details["attempted"] == "send"
    assert audit.details["queue"] == "approval"


def test_a_finished_run_takes_no_decision_and_a_plain_queue_has_no_form(client):
    run = waiting()
    client.force_login(operator("ann"))
    assert client.get(decide_url(run, "comment")).status_code == 404  # declares no choices
    assert client.get(decide_url(run, "nope")).status_code == 404
    Run.objects.filter(id=run.id).update(status="cancelled")
    response = client.post(decide_url(run), {"choice": "Approve"})
    assert "The run is cancelled: it takes no more decisions." in response.content.decode()
    assert 'data-decide="Approve"' not in response.content.decode()
    assert not Message.objects.exists()


def test_the_run_page_offers_the_decision_and_the_generic_send_keeps_the_other_queues(client):
    run = waiting()
    client.force_login(operator("ann"))
    page = client.get(reverse("admin:workflows_run_inspect", args=[run.id])).content.decode()
    links = re.findall(r'href="([^"]+)" data-queue="approval" data-choice="(\w+)"', page)
    assert [c for _, c in links] == ["Approve", "Reject"]
    assert links[0][0] == decide_url(run) + "?choice=Approve"

    send = reverse("admin:workflows_run_send", args=[run.id])
    form = client.get(send).content.decode()
    assert 'value="comment"' in form and 'value="approval"' not in form
    # An older link to the send page prefilled with a choice opens the decision form instead.
    old = client.get(send, {"queue": "approval", "choice": "Approve"})
    assert old.status_code == 302 and old["Location"] == decide_url(run) + "?choice=Approve"
    bare = client.get(send, {"queue": "approval"})
    assert bare.status_code == 302 and bare["Location"] == decide_url(run)
    assert "data-action-error" not in client.get(bare["Location"]).content.decode()
    # Posting to the send page for a decision queue is refused as an unknown choice of queue.
    client.post(
        send,
        {"queue": "approval", "body": '{"decision": "approve", "by": "x"}', "why": "x", "confirmed": "1"},
    )
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"note": "note"}, ValueError, "declare its choices"),
        ({"shows": ("summary",)}, ValueError, "declare its choices"),
        ({"choices": VERDICTS, "shows": "summary"}, TypeError, "sequence of state keys"),
        ({"choices": VERDICTS, "shows": ("",)}, TypeError, "non-empty strings"),
        ({"choices": VERDICTS, "note": ""}, TypeError, "non-empty string"),
    ],
)
def test_a_malformed_decision_is_refused_at_definition(kwargs, error, match):
    with pytest.raises(error, match=match):
        queue(**kwargs)
