"""Prometheus metrics: what a run stored is counted once (replays never), `/metrics` serves it
with the database gauges, and its token is enforced. Scraped through Django's test client and
read with prometheus_client's own parser."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from workflows import conf, setup, workflow
from workflows.models import Run
from workflows.telemetry import metrics
from workflows.telemetry.metrics import MetricsObserver, tokens_of
from workflows.testing import arun_until_idle

Sample = tuple[str, frozenset]


def scrape(**headers: str) -> dict[Sample, float]:
    response = Client().get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def parse(text: str) -> dict[Sample, float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before, after, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def flaky_registry():
    async def flaky(step):
        step.meta["usage"] = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
        if step.attempt == 1:
            raise RuntimeError("model returned bad JSON")
        return "ok"

    async def body(ctx):
        await ctx.step("load", lambda s: 1)
        for i in range(3):
            await ctx.step(f"enrich-{i}", lambda s: s.name)
        return await ctx.step("extract", flaky, retry_backoff_base=2.0)

    return setup(use={"metered": workflow(body)})


async def test_a_run_with_a_retry__each_stored_attempt_counted_once(h):
    registry = flaky_registry()
    handle = await h.client(registry, "metered").aget_or_create(["order-1"])
    observer = MetricsObserver(clock=h.clock)
    before = scrape()
    await arun_until_idle(registry, store=h.store, clock=h.clock, observers=[observer])
    after = scrape()
    assert (await handle.ainfo()).status == "completed"

    wf = "metered"
    assert delta(before, after, "workflows_runs_started_total", workflow=wf) == 1
    assert delta(before, after, "workflows_runs_finished_total", workflow=wf, status="completed") == 1
    # Two executions (the retry's backoff suspends the run): "load" and the enrich steps are
    # replayed by the second one and not counted again.
    assert delta(before, after, "workflows_step_attempts_total", workflow=wf, step="load", outcome="ok") == 1
    assert (
        delta(before, after, "workflows_step_attempts_total", workflow=wf, step="enrich-#", outcome="ok") == 3
    )
    assert (
        delta(before, after, "workflows_step_attempts_total", workflow=wf, step="extract", outcome="error")
        == 1
    )
    assert (
        delta(before, after, "workflows_step_attempts_total", workflow=wf, step="extract", outcome="ok") == 1
    )
    assert delta(before, after, "workflows_step_retries_total", workflow=wf, step="extract") == 1
    assert delta(before, after, "workflows_step_retries_total", workflow=wf, step="load") == 0
    duration = {"workflow": wf, "step": "extract", "outcome": "error"}
    assert delta(before, after, "workflows_step_duration_seconds_count", **duration) == 1
    # Both attempts called the model: the failed one's tokens were spent too.
    assert (
        delta(before, after, "workflows_model_tokens_total", workflow=wf, step="extract", kind="prompt") == 20
    )
    assert (
        delta(before, after, "workflows_model_tokens_total", workflow=wf, step="extract", kind="completion")
        == 8
    )
    assert (
        delta(before, after, "workflows_model_tokens_total", workflow=wf, step="extract", kind="total") == 0
    )
    assert delta(before, after, "workflows_schedule_to_start_seconds_count", workflow=wf) == 2
    run_duration = {"workflow": wf, "status": "completed"}
    assert delta(before, after, "workflows_run_duration_seconds_count", **run_duration) == 1
    # created -> finished spans the 2 s backoff the test clock jumped over
    assert delta(before, after, "workflows_run_duration_seconds_sum", **run_duration) >= 2.0

    # Executing again (nothing is due) counts nothing; nor does an execution that replays the
    # whole stored history (the run made due again by hand): its steps are all replays.
    await arun_until_idle(registry, store=h.store, clock=h.clock, observers=[observer])
    Run.objects.filter(id=handle.run_id).update(status="pending", wake_at=h.clock.now())
    await arun_until_idle(registry, store=h.store, clock=h.clock, observers=[observer])
    again = scrape()
    for name in (
        "workflows_step_attempts_total",
        "workflows_step_retries_total",
        "workflows_model_tokens_total",
    ):
        changed = {k: v for k, v in again.items() if k[0] == name and v != after.get(k, 0.0)}
        assert changed == {}, f"{name} moved on a replay: {changed}"
    assert delta(after, again, "workflows_runs_started_total", workflow=wf) == 0

    run_ids = {str(r) for r in Run.objects.values_list("id", flat=True)}
    for (_name, labels), _v in again.items():
        names = {k for k, _ in labels}
        assert not names & {"run_id", "run", "key", "id"}
        assert not {v for _, v in labels} & run_ids


async def test_lost_lease_and_runner_samples(h):
    from workflows.core.records import RunRecord
    from workflows.engine.observers import RunnerSample

    observer = MetricsObserver(clock=h.clock)
    run = RunRecord(id="r", workflow="metered", key=["k"], version="", status="running", state={})
    before = scrape()
    observer.execution_ended(run, status="lost", wake_at=None)
    observer.execution_ended(run, status="waiting", wake_at=None)
    observer.runner_sampled(RunnerSample(owner="me", slots_used=3, slots_free=7, loop_lag=0.25))
    after = scrape()
    assert delta(before, after, "workflows_leases_lost_total", workflow="metered") == 1
    assert value(after, "workflows_runner_slots_used") == 3
    assert value(after, "workflows_runner_slots_free") == 7
    assert value(after, "workflows_runner_event_loop_lag_seconds") == 0.25


def test_database_gauges__live_runs_backlog_and_stalled(transactional_db):
    registry = flaky_registry()
    client = registry.client("metered")
    now = dt.datetime.now(dt.UTC)
    due = [client.get_or_create([f"due-{i}"]).run_id for i in range(3)]
    Run.objects.filter(id=due[0]).update(wake_at=now - dt.timedelta(seconds=90))
    later = client.get_or_create(["later"]).run_id
    Run.objects.filter(id=later).update(status="waiting", wake_at=now + dt.timedelta(hours=1))
    stalled = client.get_or_create(["stalled"]).run_id
    Run.objects.filter(id=stalled).update(
        status="running", lease_owner="dead", wake_at=now - dt.timedelta(seconds=5)
    )

    samples = scrape()
    assert value(samples, "workflows_database_up") == 1
    assert value(samples, "workflows_runs", workflow="metered", status="pending") == 3
    assert value(samples, "workflows_runs", workflow="metered", status="waiting") == 1
    assert value(samples, "workflows_runs", workflow="metered", status="running") == 1
    assert value(samples, "workflows_backlog_runs", workflow="metered") == 3  # not the later one
    assert value(samples, "workflows_backlog_oldest_seconds", workflow="metered") >= 90
    assert value(samples, "workflows_stalled_runs", workflow="metered") == 1
    # Every served workflow has a series, zero when it has no runs (alerts see a value).
    assert ("workflows_runs", frozenset({"workflow": "aiJob", "status": "pending"}.items())) in samples
    assert value(samples, "workflows_backlog_runs", workflow="aiJob") == 0


def test_database_gauges__a_failed_read_serves_the_rest_and_says_so(transactional_db, caplog):
    with connection.cursor() as cursor:  # a real failure: the table is not there
        cursor.execute("ALTER TABLE workflows_run RENAME TO workflows_run_away")
    try:
        response = Client().get("/metrics")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE workflows_run_away RENAME TO workflows_run")
    assert response.status_code == 200
    samples = parse(response.content.decode())
    assert value(samples, "workflows_database_up") == 0
    assert not [k for k in samples if k[0] == "workflows_runs"]
    assert "workflows_step_attempts" in {
        f.name for f in text_string_to_metric_families(response.content.decode())
    }
    assert "reading the runs table failed" in caplog.text


@pytest.mark.django_db
def test_token__required_when_configured():
    with override_settings(WORKFLOWS={**conf.user_settings(), "METRICS_TOKEN": "s3cret"}):
        refused = Client().get("/metrics")
        assert refused.status_code == 401
        assert refused["Content-Type"].startswith("text/plain")
        assert refused["WWW-Authenticate"].startswith("Bearer")
        assert b"workflows_" not in refused.content
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Basic s3cret").status_code == 401
        assert "workflows_database_up" in {k[0] for k in scrape(HTTP_AUTHORIZATION="Bearer s3cret")}
    assert Client().get("/metrics").status_code == 200  # no token configured: open


@pytest.mark.django_db
def test_only_get():
    assert Client().post("/metrics").status_code == 405


@pytest.mark.django_db
def test_openmetrics_when_asked():
    response = Client().get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


def test_the_metrics_observer_is_a_default_observer():
    assert any(isinstance(o, MetricsObserver) for o in conf.observers())


@pytest.mark.django_db
def test_check__metrics_token_must_be_a_string():
    with override_settings(WORKFLOWS={**conf.user_settings(), "METRICS_TOKEN": 1234}):
        assert "workflows.E014" in {m.id for m in run_checks()}
    with override_settings(WORKFLOWS={**conf.user_settings(), "METRICS_TOKEN": "ok"}):
        assert "workflows.E014" not in {m.id for m in run_checks()}


@pytest.mark.django_db
def test_check__the_multiprocess_directory_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "missing"))
    assert "workflows.E015" in {m.id for m in run_checks()}
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert "workflows.E015" not in {m.id for m in run_checks()}


def test_tokens_of__usage_shapes():
    assert tokens_of({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}) == {
        "prompt": 3,
        "completion": 2,
    }
    assert tokens_of({"input_tokens": 7, "output_tokens": 1}) == {"prompt": 7, "completion": 1}
    assert tokens_of({"total_tokens": 9}) == {"total": 9}
    for junk in (None, [], "12", {"prompt_tokens": "3"}, {"prompt_tokens": True}, {"prompt_tokens": -1}):
        assert tokens_of(junk) == {}


def test_step_labels__numbered_steps_share_one_and_the_count_is_capped(monkeypatch):
    observer = MetricsObserver()
    assert observer.step_label("w", "enrich-12") == "enrich-#"
    assert observer.step_label("w", "page 3 of 4") == "page # of #"
    assert observer.step_label("w", "step2") == "step2"  # a digit inside a word is part of the name
    monkeypatch.setattr(metrics, "MAX_STEP_LABELS", 4)
    labels = {observer.step_label("w", f"id-{c}") for c in "abcdefg"}
    assert labels == {"id-a", metrics.OTHER_STEP}  # 3 above + "id-a" make 4: the rest share one
    assert observer.step_label("w", "enrich-99") == "enrich-#"  # a known label stays itself


async def test_schedule_to_start__from_when_the_run_was_due_to_its_claim(h):
    registry = flaky_registry()
    await h.client(registry, "metered").aget_or_create(["late"])
    h.clock.advance(3.5)  # no runner for 3.5 s
    before = scrape()
    await arun_until_idle(
        registry, store=h.store, clock=h.clock, advance=False, observers=[MetricsObserver()]
    )
    after = scrape()
    assert delta(before, after, "workflows_schedule_to_start_seconds_count", workflow="metered") == 1
    assert delta(
        before, after, "workflows_schedule_to_start_seconds_sum", workflow="metered"
    ) == pytest.approx(3.5)
