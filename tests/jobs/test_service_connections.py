"""A runner's steps share one client per service (`WORKFLOWS["RUNNER_LIFESPAN"]` enters
`jobs.services.http.service_clients`): jobs run by one `runworkflows` reuse the connections an
earlier step opened, instead of opening one per step, and the clients close when it stops."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings

from jobs.demo.server import DemoServer
from jobs.demo.services import DemoServices
from jobs.services import http
from jobs.submission import job_detail, job_submit

from .conftest import SAMPLE

JOBS = 3  # each: 2 model calls, 3 CRM calls, 1 CMS call over real sockets


class CountingServer(DemoServer):
    """The demo services over a real socket, counting the TCP connections they accept."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), DemoServices())
        self.connections = 0

    def process_request(self, request, client_address) -> None:
        self.connections += 1  # the serving thread: one connection accepted
        super().process_request(request, client_address)


@pytest.fixture
def server(settings) -> Iterator[CountingServer]:
    server = CountingServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    settings.OPENAI_BASE_URL = f"{server.url}/v1"
    settings.OPENAI_API_KEY = "demo-key"
    settings.OPENAI_MODEL = "demo"
    settings.CRM_API_URL = f"{server.url}/crm"
    settings.CMS_API_URL = f"{server.url}/cms"
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _run_jobs(server: CountingServer, lifespan: list[str]) -> int:
    """Submit JOBS jobs, run them with one `runworkflows --until-idle`; the demo's calls made."""
    jobs = [job_submit({"title": f"Call {n}", "transcript": SAMPLE}).job_id for n in range(JOBS)]
    with override_settings(WORKFLOWS={**_workflows(), "RUNNER_LIFESPAN": lifespan}):
        call_command("runworkflows", "--until-idle", "--concurrency", "1", stdout=io.StringIO())
    assert [job_detail(job)["status"] for job in jobs] == ["completed"] * JOBS
    return sum(server.services.calls.values())


def _workflows() -> dict:
    from django.conf import settings

    return dict(settings.WORKFLOWS)


@pytest.mark.django_db(transaction=True)
def test_one_runner_reuses_each_services_connections_across_steps_and_jobs(server):
    calls = _run_jobs(server, ["jobs.services.http.service_clients"])
    assert calls == JOBS * 6
    # One keep-alive connection per service (model, CRM, CMS) serves every step of every job.
    assert server.connections == 3, f"{server.connections} connections for {calls} calls"


@pytest.mark.django_db(transaction=True)
def test_without_the_lifespan_each_step_opens_its_own_connection(server):
    calls = _run_jobs(server, [])
    assert server.connections == calls == JOBS * 6


async def test_the_shared_clients_close_when_the_lifespan_ends():
    async with http.service_clients():
        async with http.client_for("crm") as first:
            pass
        async with http.client_for("crm") as again, http.client_for("cms") as other:
            assert again is first and other is not first
        assert not first.is_closed  # a step's end leaves the shared client open
    assert first.is_closed and other.is_closed
    async with http.client_for("crm") as own:  # outside a runner's lifespan: the step's own
        assert own is not first
    assert own.is_closed
