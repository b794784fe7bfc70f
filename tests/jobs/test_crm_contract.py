"""The CRM's and the CMS's contracts, against a real HTTP double (a local server on a port, not a
mock transport) speaking their APIs:

- CRM: `GET {CRM_API_URL}/companies?name=…` answers ONE company object `{"name", "plan", "seats"}`
  (a list is accepted too); 404 means no such company (`found: false` in the enrich result); any
  other non-2xx is a failure.
- CMS: of `POST /posts`'s answer only `{"url"}` is relied on.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jobs.demo.server import DemoServer
from jobs.demo.services import DemoRequest, DemoServices
from jobs.services import crm, http
from jobs.services.http import InvalidReply, ServiceUnavailable
from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows import CriticalError, RetryAfter
from workflows.testing import run_until_idle

from .conftest import SAMPLE, SAMPLE_COMPANIES


class Double(ThreadingHTTPServer):
    """The CRM under /crm and the CMS under /cms. `companies[name]` is the CRM's answer for that
    name: (status, JSON body, headers); a name it does not know is a 404."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.companies: dict[str, tuple[int, Any, dict[str, str]]] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # method, path, query

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: Double

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        self.server.requests.append(("GET", url.path, query))
        if url.path != "/crm/companies":
            return self._answer(404, {"error": "no such route"})
        status, body, headers = self.server.companies.get(
            query.get("name", ""), (404, {"error": "no such company"}, {})
        )
        self._answer(status, body, headers)

    def do_POST(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append(("POST", url.path, {}))
        if url.path != "/cms/posts":
            return self._answer(404, {"error": "no such route"})
        self._answer(201, {"url": f"{self.server.url}/cms/p/brief"})  # only the url: the contract

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def double(settings) -> Iterator[Double]:
    server = Double()
    settings.CRM_API_URL = f"{server.url}/crm"
    settings.CMS_API_URL = f"{server.url}/cms"
    yield from serving(server)  # type: ignore[misc]


def acme(**extra: Any) -> dict[str, Any]:
    return {"name": "Acme Corp", "plan": "enterprise", "seats": 120, **extra}


async def lookup(name: str) -> dict[str, Any] | None:
    async with http.client() as client:
        return await crm.find_company(client, name)


async def test_one_company_object_is_the_record(double):
    double.companies["Acme Corp"] = (200, acme(), {})
    assert await lookup("Acme Corp") == acme()
    assert double.requests == [("GET", "/crm/companies", {"name": "Acme Corp"})]


async def test_a_list_is_accepted_and_the_exact_name_preferred(double):
    double.companies["Acme Corp"] = (200, [acme(name="Acme Corporation"), acme(name="acme corp")], {})
    assert await lookup("Acme Corp") == acme(name="acme corp")
    double.companies["Acme Corp"] = (200, [], {})
    assert await lookup("Acme Corp") is None


async def test_404_is_not_found(double):
    assert await lookup("Nobody Inc") is None


@pytest.mark.parametrize(
    ("status", "headers", "error"),
    [
        (500, {}, ServiceUnavailable),
        (503, {}, ServiceUnavailable),
        (429, {"Retry-After": "7"}, RetryAfter),
        (400, {}, CriticalError),
        (401, {}, CriticalError),
        (410, {}, CriticalError),
    ],
)
async def test_any_other_non_2xx_is_a_failure(double, status, headers, error):
    double.companies["Acme Corp"] = (status, {"error": "nope"}, headers)
    with pytest.raises(error, match=f"CRM returned {status}"):
        await lookup("Acme Corp")


@pytest.mark.parametrize("body", [{"companies": "x"}, "Acme", [acme(), "Acme"], {"plan": "free"}, None])
async def test_a_2xx_without_a_company_object_is_an_invalid_reply(double, body):
    double.companies["Acme Corp"] = (200, body, {})
    with pytest.raises(InvalidReply, match="CRM returned no company object"):
        await lookup("Acme Corp")


def test_the_demo_crm_answers_one_company_object():
    answer = DemoServices().handle(DemoRequest("GET", "/crm/companies", query={"name": "Acme Corp"}))
    assert answer.status == 200
    company = json.loads(answer.body)
    assert set(company) == {"name", "plan", "seats"}
    assert company["name"] == "Acme Corp"
    assert isinstance(company["plan"], str) and isinstance(company["seats"], int)


@pytest.fixture
def model(settings) -> Iterator[DemoServer]:
    """The demo model on a port of its own (the CRM and the CMS are the double)."""
    server = DemoServer(("127.0.0.1", 0), DemoServices())
    settings.OPENAI_BASE_URL = f"{server.url}/v1"
    settings.OPENAI_API_KEY = "demo-key"
    settings.OPENAI_MODEL = "demo"
    yield from serving(server)  # type: ignore[misc]


@pytest.mark.django_db
def test_a_job_enriches_found_and_unknown_companies_and_publishes_with_only_a_url(double, model):
    double.companies["Acme Corp"] = (200, acme(), {})  # the others are 404s: not in the CRM
    job_id = job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id
    run_until_idle(registry)
    run = jobs_client().get([job_id]).info()

    assert run.status == "completed", run.error
    by_name = {c["name"]: c for c in run.state["companies"]}
    assert list(by_name) == SAMPLE_COMPANIES
    assert by_name["Acme Corp"] == {"name": "Acme Corp", "found": True, "crm": acme()}
    assert by_name["Initech Systems"] == {"name": "Initech Systems", "found": False, "crm": None}
    assert run.result == {"postId": None, "url": f"{double.url}/cms/p/brief"}
    assert run.state["url"] == f"{double.url}/cms/p/brief"
    assert "Initech Systems (not in the CRM)" in run.state["summary"]
    assert "Acme Corp (enterprise plan, 120 seats)" in run.state["summary"]
