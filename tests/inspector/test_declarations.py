"""What a workflow declares for the inspector: `labels` name its runs in the admin and on the
dashboard, a queue's `choices` make it a decision queue whose buttons open the audited send
prefilled. The workflows are the tests' own (tests/inspector/flows.py), not the example app's; a
workflow declaring nothing, or unknown to this server, shows its runs bare."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from tests.inspector import flows
from workflows import conf, queue, setup, workflow
from workflows.engine.definition import OPERATOR
from workflows.masking import MASK
from workflows.models import AuditEntry, Message, Run
from workflows.reads import decisions as dashboard_selectors  # the names the assertions use
from workflows.reads import live as selectors
from workflows.testing import run_until_idle

# --- refused at definition ----------------------------------------------------------------------


async def _noop(ctx):
    return None


@pytest.mark.parametrize(
    ("choices", "error", "match"),
    [
        (["Approve"], TypeError, "must map a button label"),
        ({1: {"decision": "approve"}}, TypeError, "label must be a string"),
        ({"": {"decision": "approve"}}, ValueError, "must not be empty"),
        ({"  ": {"decision": "approve"}}, ValueError, "must not be empty"),
        ({"Approve": {"at": object()}}, TypeError, "'Approve' is not JSON"),
        ({"Approve": {"score": float("nan")}}, TypeError, "'Approve' is not JSON"),
    ],
)
def test_queue__malformed_choices_are_refused_at_definition(choices, error, match):
    with pytest.raises(error, match=match):
        queue(choices=choices)


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        ("title", TypeError, "sequence of state keys"),
        (None, TypeError, "sequence of state keys"),
        (["title", 3], TypeError, "must name a state key"),
        (["title", ""], ValueError, "must not be an empty string"),
        (("stage", "stage"), ValueError, "more than once"),
    ],
)
def test_workflow__malformed_labels_are_refused_at_definition(labels, error, match):
    with pytest.raises(error, match=match):
        workflow(_noop, labels=labels)


def test_declarations__are_kept_on_the_definition_as_given():
    wf = workflow(_noop, queues={"q": queue(choices={"Go": [1, "x"]})}, labels=["title", "stage"])
    assert wf.labels == ("title", "stage") and wf.queues["q"].choices == {"Go": [1, "x"]}
    assert workflow(_noop).labels == () and queue().choices == {}


def test_choice_body__puts_the_operator_wherever_the_placeholder_stands():
    spec = queue(choices={"Sign": {"by": OPERATOR, "also": [OPERATOR, "x"], "note": f"{OPERATOR}!"}})
    assert spec.choice_body("Sign", operator="ann") == {
        "by": "ann",
        "also": ["ann", "x"],
        "note": "$operator!",
    }
    assert spec.choices["Sign"]["by"] == OPERATOR  # the template itself is untouched
    with pytest.raises(KeyError):
        spec.choice_body("Nope", operator="ann")


# --- in the inspector ---------------------------------------------------------------------------


def expense(key: str, *, claimed: bool = True) -> Run:
    """An expense run waiting for its verdict (or, not `claimed`, for its claim)."""
    handle = flows.registry.client("expense").get_or_create([key])
    if claimed:
        handle.send("claim", {"claimant": "Ann Lee", "amount": 42.5, "card_token": "tok_visa_4242"})
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def waiting_approval(key: str) -> Run:
    handle = flows.registry.client("approval").get_or_create([key])
    run_until_idle(flows.registry)
    return Run.objects.get(id=handle.run_id)


def decision_row(page: str, run: Run) -> str | None:
    row = re.search(rf'<tr data-decision="{run.id}">.*?</tr>', page, re.S)
    return row.group(0) if row else None


@pytest.mark.django_db
def test_dashboard__a_decision_queue_lists_its_runs_with_their_labels_and_one_button_per_choice(
    admin_client,
):
    claimed = expense("e-1")
    unclaimed = expense("e-2", claimed=False)  # waits on "claim", not on its decision queue
    bare = waiting_approval("a-1")  # waits on a queue that declares no choices

    response = admin_client.get("/dashboard/")
    page = response.content.decode()
    assert "runs waiting on a decision queue" in page
    assert [row["decision"].run_id for row in response.context["decisions"]] == [str(claimed.id)]
    row = decision_row(page, claimed)
    assert row is not None and decision_row(page, unclaimed) is None and decision_row(page, bare) is None
    assert "<strong data-label-title>Ann Lee</strong>" in row
    assert re.search(r'data-label="phase">.*?in review', row) and re.search(
        r'data-label="amount">.*?42\.5', row
    )
    assert "tok_visa_4242" not in page and MASK in row  # a label is masked like any recorded value
    buttons = re.findall(r'data-queue="(\w+)" data-choice="(\w+)".*?href="([^"]+)">(\w+)…', row)
    assert [(q, c, text) for q, c, _, text in buttons] == [
        ("verdict", "Pay", "Pay"),
        ("verdict", "Refuse", "Refuse"),
    ]

    # Pay opens the decision form, Pay picked out, showing the body it sends (the operator as
    # `approver`); the queue declares no note, so the audit reason names the choice.
    pay = html.unescape(buttons[0][2])
    form = admin_client.get(pay)
    assert [b["choice"] for b in form.context["buttons"] if b["picked"]] == ["Pay"]
    assert json.loads(form.context["buttons"][0]["body"]) == {"pay": True, "approver": "admin"}
    assert 'name="note"' not in form.content.decode()
    assert not Message.objects.filter(queue="verdict").exists()  # nothing sent by opening it
    sent = admin_client.post(pay, {"choice": "Pay"})
    assert sent.status_code == 302
    audit = AuditEntry.objects.get(run=claimed)
    assert (audit.action, audit.actor, audit.reason) == ("send", "admin", "Pay (decision form)")
    run_until_idle(flows.registry)
    done = Run.objects.get(id=claimed.id)
    assert done.status == "completed" and done.result == {"pay": True, "approver": "admin"}
    assert done.state["phase"] == "paid"
    assert 'id="wf-decisions"' not in admin_client.get("/dashboard/").content.decode()  # decided


@pytest.mark.django_db
def test_dashboard__workflows_declaring_nothing_show_no_buttons_and_no_labels(admin_client):
    run = waiting_approval("a-2")
    page = admin_client.get("/dashboard/").content.decode()
    assert 'id="wf-decisions"' not in page and "data-run-labels" not in page
    assert f'data-run="{run.id}"' in page  # still listed with the other runs
    assert selectors.run_summary(run)["labels"] == {"title": None, "details": []}
    assert dashboard_selectors.awaiting_decision() == []


@pytest.mark.django_db
def test_decide__an_undeclared_choice_picks_nothing_and_says_so(admin_client):
    run = expense("e-3")
    url = reverse("admin:workflows_run_send", args=[run.id])
    response = admin_client.get(url, {"queue": "verdict", "choice": "Maybe"}, follow=True)
    assert response.status_code == 200 and not any(b["picked"] for b in response.context["buttons"])
    assert "“Maybe” is not a declared choice of the queue “verdict”" in response.content.decode()
    # The plain send page links the declared choices to the decision form.
    page = admin_client.get(url).content.decode()
    assert re.findall(r'data-queue="verdict" data-choice="(\w+)"', page) == ["Pay", "Refuse"]
    bare = reverse("admin:workflows_run_send", args=[waiting_approval("a-3").id])
    assert "data-choice-links" not in admin_client.get(bare).content.decode()


@pytest.mark.django_db
def test_labels__name_the_run_in_the_admin_list_on_its_pages_and_in_the_live_feed(admin_client):
    run = expense("e-4")
    changelist = admin_client.get(reverse("admin:workflows_run_changelist")).content.decode()
    assert "<strong data-label-title>Ann Lee</strong>" in changelist and "tok_visa_4242" not in changelist
    for url in (
        reverse("admin:workflows_run_inspect", args=[run.id]),
        reverse("inspector:run", args=[run.id]),
    ):
        page = admin_client.get(url, follow=True).content.decode()
        assert re.search(r'class="wf-run-labels".*?Ann Lee.*?in review', page, re.S), url
    summary = selectors.run_summary(run)
    assert summary["labels"]["title"] == "Ann Lee"
    assert summary["labels"]["details"] == [
        {"key": "phase", "text": "in review"},
        {"key": "amount", "text": "42.5"},
        {"key": "card_token", "text": MASK},
    ]


@pytest.mark.django_db
def test_labels__a_missing_or_null_value_is_left_out(admin_client):
    run = expense("e-5", claimed=False)  # claimant and amount still null
    summary = selectors.run_summary(run)
    assert summary["labels"] == {"title": None, "details": [{"key": "phase", "text": "new"}]}


@pytest.mark.django_db
def test_a_workflow_this_server_does_not_know_shows_bare_and_never_crashes(admin_client):
    """Its own definition declares a decision queue and labels, but no registry of this server
    names it: the server's declarations are what count."""
    ghost = setup(use={"ghost": workflow(flows.expense_run, queues=flows.registry.get("expense").queues,
                                         labels=("claimant",), version="v1")})  # fmt: skip
    handle = ghost.client("ghost").get_or_create(["g-1"])
    handle.send("claim", {"claimant": "Nobody", "amount": 1})
    run_until_idle(ghost)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting" and run.state["claimant"] == "Nobody"

    dashboard = admin_client.get("/dashboard/")
    assert dashboard.status_code == 200 and 'id="wf-decisions"' not in dashboard.content.decode()
    for url in (
        reverse("admin:workflows_run_changelist"),
        reverse("admin:workflows_run_inspect", args=[run.id]),
        reverse("inspector:run", args=[run.id]),
        reverse("admin:workflows_run_send", args=[run.id]) + "?queue=verdict&choice=Pay",
    ):
        response = admin_client.get(url, follow=True)
        assert response.status_code == 200, url
        assert "data-run-labels" not in response.content.decode(), url
    assert selectors.run_summary(run)["labels"] == {"title": None, "details": []}


# Two versions of `expense`: the older one (still serving its runs) declares a decision queue and
# a label, the latest neither.
EXPENSE_V1 = workflow(
    flows.expense_run,
    queues={"claim": queue(), "verdict": queue(choices={"Pay (v1)": {"pay": True, "approver": OPERATOR}})},
    labels=("claimant",),
    version="v1",
)
EXPENSE_V2 = workflow(flows.expense_run, queues={"claim": queue(), "verdict": queue()}, version="v2")
VERSIONED = setup(use={"expense": [EXPENSE_V2, EXPENSE_V1]})


@pytest.mark.django_db
def test_a_run_shows_what_the_version_it_runs_declares(admin_client, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.inspector.test_declarations.VERSIONED"]}
    conf.registry.cache_clear()  # the autouse fixture clears it again afterwards
    runs = {}
    for version, registry in (("v1", setup(use={"expense": EXPENSE_V1})), ("v2", VERSIONED)):
        handle = registry.client("expense").get_or_create([f"on-{version}"])
        handle.send("claim", {"claimant": f"Claimant {version}", "amount": 1})
        run_until_idle(registry)
        runs[version] = Run.objects.get(id=handle.run_id)
        assert (runs[version].version, runs[version].status) == (version, "waiting")

    page = admin_client.get("/dashboard/").content.decode()
    row = decision_row(page, runs["v1"])
    assert row is not None and decision_row(page, runs["v2"]) is None
    assert "Claimant v1" in row and re.findall(r'data-choice="([^"]+)"', row) == ["Pay (v1)"]
    assert selectors.run_summary(runs["v2"])["labels"] == {"title": None, "details": []}
