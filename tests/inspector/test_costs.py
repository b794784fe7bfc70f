"""Cost you can see: a run's page adds up its model calls' tokens by model and by step and prices
them by WORKFLOWS["MODEL_PRICES"] (a dated model at its family's price, an unknown one as tokens
only); a replayed step's superseded record still counts; the dashboard shows each workflow's
cost of the last hour."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from tests.inspector import cost_flows
from tests.inspector.cost_flows import priced_registry  # noqa: F401 (a fixture)
from workflows import operations
from workflows.models import Entry, Run
from workflows.reads.costs import workflow_costs
from workflows.testing import run_until_idle

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("priced_registry")]


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def run_of(name: str, key: str) -> Run:
    handle = cost_flows.registry.client(name).get_or_create([key])
    run_until_idle(cost_flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "completed", run.error
    return run


def row(page: str, attribute: str, value: str) -> str:
    found = re.search(rf'<tr {attribute}="{re.escape(value)}">(.*?)</tr>', page, re.S)
    assert found, f"no row {attribute}={value!r}"
    return found.group(1)


def cell(row_html: str, name: str) -> str:
    found = re.search(rf"<td[^>]*{name}>(.*?)</td>", row_html, re.S)
    assert found, f"no {name} cell in {row_html}"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_run_page__tokens_by_model_and_by_step_and_the_run_cost(admin_client):
    run = run_of("drafted", "a")
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[run.id])).content.decode()

    mini = row(page, "data-model", "gpt-4o-mini-2024-07-18")
    assert "(gpt-4o-mini)" in mini  # priced as its family
    assert (cell(mini, "data-tokens"), cell(mini, "data-cost")) == ("3000", "$0.0009")
    big = row(page, "data-model", "gpt-4o")
    assert (cell(big, "data-tokens"), cell(big, "data-cost")) == ("2200", "$0.0070")
    local = row(page, "data-model", "local-llm")
    assert (cell(local, "data-tokens"), cell(local, "data-cost")) == ("42", "tokens only")
    assert (cell(row(page, "data-step", "draft"), "data-cost")) == "$0.0009"
    assert (cell(row(page, "data-step", "tag"), "data-tokens")) == "42"
    assert 'data-step="plain"' not in page  # no model call, no line
    facts = re.search(r"data-run-cost>(.*?)</div></div>", page, re.S).group(1)
    assert "$0.0079" in facts and "+ 42 tokens unpriced" in facts
    assert re.search(r"data-run-tokens><div class=\"k\">Tokens</div><div class=\"v\">5242<", page)


def test_run_page__a_replayed_step_still_counts_and_no_prices_means_tokens_only(admin_client, settings):
    run = run_of("drafted", "r")
    review = Entry.objects.get(run=run, name="review", superseded=False)
    operations.replay_from(str(run.id), review.id, actor="ann", reason="retry the review")
    run_until_idle(cost_flows.registry)
    url = reverse("admin:workflows_run_inspect", args=[run.id])
    page = admin_client.get(url).content.decode()
    big = row(page, "data-model", "gpt-4o")  # the superseded review and its replacement
    assert (cell(big, "data-tokens"), cell(big, "data-cost")) == ("4400", "$0.0140")
    assert "$0.0149" in re.search(r"data-run-cost>(.*?)</div></div>", page, re.S).group(1)

    settings.WORKFLOWS = {**settings.WORKFLOWS, "MODEL_PRICES": {}}
    page = admin_client.get(url).content.decode()
    assert cell(row(page, "data-model", "gpt-4o"), "data-cost") == "tokens only"
    assert "no model priced" in page


def test_run_page__a_run_without_model_calls_shows_no_usage(admin_client, settings):
    run = run_of("tagged", "t")
    Entry.objects.filter(run=run).update(meta=None)
    page = admin_client.get(reverse("admin:workflows_run_inspect", args=[run.id])).content.decode()
    assert "data-run-usage" not in page and "data-run-cost" not in page


def test_dashboard__cost_per_workflow_of_the_last_hour(admin_client):
    run_of("drafted", "1")
    run_of("drafted", "2")
    run_of("tagged", "1")
    old = run_of("drafted", "old")  # its calls ended two hours ago: outside the window
    Entry.objects.filter(run=old).update(finished_at=timezone.now() - dt.timedelta(hours=2))

    [drafted, tagged] = workflow_costs()
    assert (drafted.workflow, drafted.summary.total.calls) == ("drafted", 6)
    assert drafted.summary.cost == pytest.approx(2 * cost_flows.RUN_COST)
    assert (tagged.workflow, tagged.summary.cost, tagged.summary.total.tokens) == ("tagged", None, 50)

    page = admin_client.get(reverse("inspector:stats")).content.decode()
    line = row(page, "data-workflow", "drafted")
    assert cell(line, "data-cost").startswith("$0.0158") and "+ 84 tokens unpriced" in cell(line, "data-cost")
    assert cell(row(page, "data-workflow", "tagged"), "data-cost") == "tokens only"
    assert cell(row(page, "data-workflow", "tagged"), "data-tokens") == "50"
    assert "Model cost, last hour" in admin_client.get(reverse("inspector:dashboard")).content.decode()
