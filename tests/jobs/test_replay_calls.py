"""The replay confirmation tells which external calls run again: the example job declares its
steps' calls (`workflow(..., calls_out=...)`), and the page lists the steps a replay runs again,
e.g. "publish will post the brief to the CMS again, under a new idempotency key"."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from jobs.submission import job_submit, jobs_client
from jobs.workflows import ai_job, registry
from workflows import workflow
from workflows.models import Entry
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = pytest.mark.django_db


def failed_at_publish(demo) -> str:
    demo.script("cms", ["400"])
    job_id = job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id
    run_until_idle(registry)
    run_id = jobs_client().get([job_id]).run_id
    return run_id


def confirmation(client, run_id: str, step: str) -> str:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    entry = Entry.objects.get(run_id=run_id, name=step, superseded=False)
    response = client.get(reverse("admin:workflows_run_replay", args=[run_id, entry.id]))
    assert response.status_code == 200
    text = re.sub(r"<[^>]+>", "", response.content.decode())  # the page's words, tags dropped
    return " ".join(html.unescape(text).split())


def test_replaying_publish_says_the_post_goes_to_the_cms_again(client, demo):
    page = confirmation(client, failed_at_publish(demo), "publish")
    assert "Steps that will run again" in page
    assert "publish will post the brief to the CMS again, under a new idempotency key." in page
    assert "ask the model" not in page  # extract and summarize are kept: they do not run again


def test_replaying_from_extract_lists_every_call_that_runs_again(client, demo):
    page = confirmation(client, failed_at_publish(demo), "extract")
    for sentence in (
        "extract will ask the model to extract the companies and action items again",
        "enrich-0 will look the company up in the CRM again",
        "enrich-2 will look the company up in the CRM again",
        "summarize will ask the model to write the brief again",
        "publish will post the brief to the CMS again, under a new idempotency key.",
    ):
        assert sentence in page


def test_the_job_declares_its_calls_and_patterns_match():
    assert ai_job.call_of("publish") == "post the brief to the CMS"
    assert ai_job.call_of("enrich-12") == "look the company up in the CRM"
    assert ai_job.call_of("wait-start") is None


@pytest.mark.parametrize(
    "calls",
    [["publish"], {"publish": ""}, {"": "post"}, {"publish": 3}],
    ids=["list", "empty", "blank", "number"],
)
def test_a_malformed_calls_out_is_refused_at_declaration(calls):
    async def body(ctx):
        pass

    with pytest.raises(TypeError, match="calls_out"):
        workflow(body, calls_out=calls)
