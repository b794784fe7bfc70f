"""Metrics of real runner processes: in multiprocess mode the web's /metrics adds up the runners'
files; without it a runner serves its own on --metrics-port."""

from __future__ import annotations

import signal

import httpx2
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.support import free_port, wait_for
from workflows.models import Run

from .flows import registry


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def web_metrics() -> dict[tuple[str, frozenset], float]:
    response = Client().get("/metrics")
    assert response.status_code == 200
    return parse(response.content.decode())


def get(samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_multiprocess__the_web_adds_up_every_runner(runners, tmp_path, monkeypatch, settings):
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "REGISTRIES": ["tests.acceptance.flows.registry"],
    }  # the web's
    directory = tmp_path / "prometheus"
    directory.mkdir()
    monkeypatch.setattr(
        runners, "env", lambda env=runners.env: {**env(), "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    )
    client = registry.client("many")
    ids = [client.get_or_create([f"m{i}"]).run_id for i in range(6)]
    procs = [runners.start("--concurrency", "3"), runners.start("--concurrency", "4")]
    wait_for(
        lambda: Run.objects.filter(id__in=ids, status="completed").count() == 6,
        timeout=60,
        what="6 runs to complete",
    )
    # The web process reads the directory the runners write to (set for the scrape only: its own
    # metrics live in memory, as this test process started without the variable).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))

    # A runner counts a run's completion just after the commit that a test sees: wait for the count.
    wait_for(
        lambda: get(web_metrics(), "workflows_runs_finished_total", workflow="many", status="completed") == 6,
        timeout=30,
        what="the runners' files to count 6 completed runs",
    )
    samples = web_metrics()
    assert get(samples, "workflows_runs_started_total", workflow="many") == 6
    assert get(samples, "workflows_runs_finished_total", workflow="many", status="completed") == 6
    for step in ("s1", "s2", "s3"):
        assert get(samples, "workflows_step_attempts_total", workflow="many", step=step, outcome="ok") == 6
        assert (
            get(samples, "workflows_step_duration_seconds_count", workflow="many", step=step, outcome="ok")
            == 6
        )
    assert get(samples, "workflows_schedule_to_start_seconds_count", workflow="many") == 6
    assert get(samples, "workflows_database_up") == 1  # and the database gauges beside them
    assert get(samples, "workflows_runs", workflow="many", status="pending") == 0
    assert get(samples, "workflows_backlog_runs", workflow="many") == 0

    # Both runners sample their slots (every few seconds): the free slots add up to 3 + 4.
    def slots_free():
        return get(web_metrics(), "workflows_runner_slots_free") == 7

    wait_for(slots_free, timeout=30, what="both runners' slot samples")

    for proc in procs:  # a runner that exits leaves the sums; its counters stay
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    samples = web_metrics()
    assert get(samples, "workflows_runner_slots_free") in (None, 0)
    assert get(samples, "workflows_runs_started_total", workflow="many") == 6


def test_single_process__a_runner_serves_its_own_metrics(runners, monkeypatch):
    port = free_port()
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {
            **{k: v for k, v in env().items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            "WORKFLOWS_METRICS_PORT": str(port),
        },
    )
    client = registry.client("many")
    ids = [client.get_or_create([f"p{i}"]).run_id for i in range(3)]
    proc = runners.start()
    wait_for(
        lambda: Run.objects.filter(id__in=ids, status="completed").count() == 3,
        timeout=60,
        what="3 runs to complete",
    )

    def scrape():
        if proc.poll() is not None:
            raise AssertionError(f"the runner exited with {proc.returncode}")
        try:
            return parse(httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text)
        except httpx2.HTTPError:
            return None

    samples = wait_for(scrape, what="the runner's metrics port")
    assert get(samples, "workflows_runs_started_total", workflow="many") == 3
    assert get(samples, "workflows_step_attempts_total", workflow="many", step="s2", outcome="ok") == 3
    assert get(samples, "workflows_database_up") is None  # the database gauges are the web's
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


def test_bad_metrics_port__refused_before_the_runner_starts(runners):
    proc = runners.start("--metrics-port", "70000")
    assert proc.wait(60) != 0
    out = runners.output(proc).text()
    assert "--metrics-port must be a port number" in out
