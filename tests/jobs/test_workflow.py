"""The aiJob and invoice workflows, run in-process until idle (backoff skipped by a fake clock),
against the demo services through an httpx2 MockTransport. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import PublishedBrief
from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows.core.idempotency import step_idempotency_key
from workflows.core.records import Audit
from workflows.models import Attempt, Entry
from workflows.testing import run_until_idle

from .conftest import SAMPLE, SAMPLE_COMPANIES

pytestmark = pytest.mark.django_db


def start_job(title: str = "Discovery call", transcript: str = SAMPLE) -> str:
    return job_submit({"title": title, "transcript": transcript}).job_id


def finish(job_id: str):
    run_until_idle(registry)
    return jobs_client().get([job_id]).info()


def steps(job_id: str) -> dict[str, Entry]:
    run_id = jobs_client().get([job_id]).run_id
    return {e.name: e for e in Entry.objects.filter(run_id=run_id, superseded=False, kind="step")}


def attempts(entry: Entry) -> list[str]:
    return [a.outcome for a in entry.attempt_history()]


def progress(job_id: str) -> list[tuple[str, str | None]]:
    events = jobs_client().get([job_id]).events()
    return [(e.payload["stage"], e.payload["detail"]) for e in events if e.name == "progress"]


def test_job__runs_to_published_with_exactly_one_post(demo):
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "completed"
    assert run.state["stage"] == "published"
    assert run.state["url"] == "http://demo.test/cms/posts/1"
    assert run.result == {"postId": 1, "url": "http://demo.test/cms/posts/1"}
    assert run.state["extracted"]["companies"] == SAMPLE_COMPANIES
    assert [c["name"] for c in run.state["companies"]] == SAMPLE_COMPANIES
    assert run.state["summary"].startswith("Brief: Discovery call.")
    (post,) = demo.posts.values()  # exactly one
    # The publish step's own idempotency key (stable across its attempts, new after a replay).
    run_id = run.id
    assert post["idempotencyKey"] == step_idempotency_key(run_id, 0, "", "publish")
    assert demo.calls == {"extract": 1, "crm": 3, "summarize": 1, "cms": 1}
    assert [stage for stage, _ in progress(job_id)] == [
        "extracting", "enriching", "enriching", "enriching", "summarizing", "publishing", "published",
    ]  # fmt: skip


def test_job__steps_record_their_input_and_token_usage(demo):
    job_id = start_job()
    finish(job_id)
    recorded = steps(job_id)

    assert list(recorded) == [
        "extract", "enrich-0", "enrich-1", "enrich-2", "summarize", "publish", "record-publication",
    ]  # fmt: skip
    assert recorded["extract"].input == {"title": "Discovery call", "transcript": SAMPLE}
    assert [recorded[f"enrich-{i}"].input for i in range(3)] == SAMPLE_COMPANIES
    assert recorded["summarize"].input["actionItems"][0].startswith("Send the ROI model")
    assert [c["crm"]["name"] for c in recorded["summarize"].input["companies"]] == SAMPLE_COMPANIES
    assert recorded["publish"].input == "Discovery call"
    # The published brief's row, written in the transaction that recorded the step.
    [row] = PublishedBrief.objects.filter(job_id=str(job_id))
    assert (row.url, row.title) == (recorded["publish"].output["url"], "Discovery call")
    assert recorded["record-publication"].output == {"publishedBriefId": row.id}
    assert recorded["record-publication"].meta == {"transaction": True}
    for name in ("extract", "summarize"):
        usage = recorded[name].meta["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0


def test_job__429_then_503_on_extract_takes_three_attempts_and_still_one_post(demo):
    demo.script("extract", ["429", "503"])
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "completed"
    extract = steps(job_id)["extract"]
    assert extract.attempts == 3
    assert attempts(extract) == ["error", "error", "ok"]
    assert [a.delay for a in Attempt.objects.filter(entry=extract).order_by("number")] == [4.0, 8.0, None]
    assert demo.calls["extract"] == 3
    assert len(demo.posts) == 1
    details = [detail for _, detail in progress(job_id)]
    assert "extract failed (model returned 429), retrying in 4 s" in details
    assert "extract failed (model returned 503), retrying in 8 s" in details


def test_job__retry_after_from_the_model_sets_the_wait(demo):
    demo.script("extract", ["429:13"])
    job_id = start_job()
    assert finish(job_id).status == "completed"
    first = Attempt.objects.filter(entry=steps(job_id)["extract"]).order_by("number").first()
    assert first.delay == 13.0
    assert "extract failed (model returned 429), retrying in 13 s" in [d for _, d in progress(job_id)]


def test_job__401_fails_at_once_with_no_retry(demo):
    demo.script("extract", ["401"])
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "failed"
    assert run.state["stage"] == "failed"
    assert "extract failed (model returned 401: " in run.state["error"]
    assert "scripted 401" in run.state["error"]  # the response text is carried
    extract = steps(job_id)["extract"]
    assert (extract.status, extract.attempts, attempts(extract)) == ("failed", 1, ["critical"])
    assert demo.calls == {"extract": 1}
    assert progress(job_id)[-1] == ("failed", run.state["error"])
    assert [stage for stage, _ in progress(job_id)].count("failed") == 1
    assert not demo.posts


def test_job__bad_json_from_the_model_retries(demo):
    demo.script("extract", ["bad-json", "bad-json"])
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "completed"
    extract = steps(job_id)["extract"]
    assert attempts(extract) == ["error", "error", "ok"]
    assert "model returned invalid JSON" in Attempt.objects.get(entry=extract, number=1).error["message"]
    assert run.state["extracted"]["companies"] == SAMPLE_COMPANIES


def test_job__a_crm_500_retries_only_that_companys_step(demo):
    job_id = start_job()
    demo.script("crm", ["ok", "500"])  # the second company's lookup fails once
    run = finish(job_id)

    assert run.status == "completed"
    recorded = steps(job_id)
    assert [recorded[f"enrich-{i}"].attempts for i in range(3)] == [1, 2, 1]
    assert attempts(recorded["enrich-1"]) == ["error", "ok"]
    assert demo.calls["crm"] == 4
    assert demo.calls["extract"] == 1 and demo.calls["summarize"] == 1
    assert "enrich-1 failed (CRM returned 500), retrying in 4 s" in [d for _, d in progress(job_id)]


def test_job__a_lost_cms_response_is_retried_without_a_second_post(demo):
    demo.script("cms", ["drop"])
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "completed"
    assert attempts(steps(job_id)["publish"]) == ["error", "ok"]
    assert demo.calls["cms"] == 2
    assert len(demo.posts) == 1
    assert run.state["url"] == "http://demo.test/cms/posts/1"


def test_job__an_operators_replay_of_publish_posts_again_under_a_new_key(demo):
    job_id = start_job()
    run = finish(job_id)
    (first,) = demo.posts.values()

    publish = steps(job_id)["publish"]
    jobs_client().store.replay(
        run.id, publish.id, audit=Audit(actor="ops:ada", reason="fixed"), now=timezone.now()
    )
    again = finish(job_id)

    assert again.status == "completed"
    assert len(demo.posts) == 2  # the replay reached the CMS: a new request, not the old answer
    keys = [p["idempotencyKey"] for p in demo.posts.values()]
    assert keys == [first["idempotencyKey"], step_idempotency_key(run.id, 1, "", "publish")]
    assert again.state["url"] != run.state["url"]
    # Each recorded publication has its row: the replayed one records the new post.
    urls = PublishedBrief.objects.filter(job_id=str(job_id)).order_by("id").values_list("url", flat=True)
    assert list(urls) == [run.state["url"], again.state["url"]]


def test_job__exhausted_retries_mark_the_job_failed(demo):
    demo.script("summarize", ["503"] * 7)
    job_id = start_job()
    run = finish(job_id)

    assert run.status == "failed"
    summarize = steps(job_id)["summarize"]
    assert summarize.attempts == 7  # 6 retries
    delays = [a.delay for a in Attempt.objects.filter(entry=summarize).order_by("number")]
    assert delays == [4.0, 8.0, 16.0, 32.0, 60.0, 60.0, None]
    assert run.state["error"] == "summarize failed (model returned 503), no retry left"
    assert not demo.posts


def test_job__a_transcript_without_companies_goes_straight_to_the_summary(demo):
    job_id = start_job(transcript="Nobody was named. I will call back tomorrow.")
    run = finish(job_id)
    assert run.status == "completed"
    assert run.state["companies"] == []
    assert "enrich-0" not in steps(job_id)
    assert "1. Call back tomorrow." in run.state["summary"]


def test_job__status_action_reads_the_state(demo):
    job_id = start_job()
    finish(job_id)
    status = jobs_client().get([job_id]).action("status")
    assert (status["status"], status["stage"]) == ("completed", "published")


# --- invoice -------------------------------------------------------------------------------------


def test_invoice__loads_subtotal_calculates_tax_and_saves():
    handle = registry.client("invoice").get_or_create(["inv-1"])
    lines = [
        {"description": "Seats", "quantity": 3, "unit_price_cents": 1999},
        {"description": "Setup", "quantity": 1, "unit_price_cents": 5000},
    ]
    handle.send("order", {"region": "US-CA", "lines": lines})
    run_until_idle(registry)
    run = handle.info()

    assert run.status == "completed"
    assert run.result == {"subtotal_cents": 10997, "tax_cents": 797, "region": "US-CA", "total_cents": 11794}
    assert run.state == {"status": "saved", "invoice": run.result}
    assert handle.action("total") == 11794
    names = list(Entry.objects.filter(run_id=handle.run_id, kind="step").values_list("name", flat=True))
    assert names == ["load-subtotal", "calculate-tax", "save-invoice"]


def test_invoice__unknown_region_fails_without_retry():
    handle = registry.client("invoice").get_or_create(["inv-2"])
    handle.send(
        "order", {"region": "Mars", "lines": [{"description": "x", "quantity": 1, "unit_price_cents": 1}]}
    )
    run_until_idle(registry)
    run = handle.info()
    assert run.status == "failed"
    tax = Entry.objects.get(run_id=handle.run_id, name="calculate-tax")
    assert (tax.status, tax.attempts) == ("failed", 1)
