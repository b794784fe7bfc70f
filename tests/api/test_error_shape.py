"""Every error under /jobs and /api/ is JSON of the one documented shape, with the standard reason
phrase: unknown URLs (404), a method the route does not take (405, with `Allow`), a crash (500,
logged, its text never shown), unknown runs and jobs (404, no Python repr in the message); over
the sync and the async (daphne's) request paths alike. Other pages keep Django's own errors."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error

pytestmark = pytest.mark.django_db

REASONS = {404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


def assert_shape(response, status: int, code: str) -> dict:
    error = assert_error(response, status, code)
    assert response["Content-Type"].startswith("application/json")
    assert response.reason_phrase == REASONS[status]
    assert "['" not in error["message"] and "Traceback" not in error["message"]
    return error


@pytest.mark.parametrize(
    "path", ["/api/nope", "/api/runs/x/y/z", "/jobs/x/y", "/jobs/x/y/", "/api/", "/api/workflows"]
)
def test_an_unknown_url_is_a_json_404(api, path):
    error = assert_shape(api.get(path), 404, "not_found")
    assert error["message"] == f"no such URL: GET {path}"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("delete", "/jobs", "POST"),
        ("put", "/api/runs", "GET"),
        ("get", "/api/workflows/approval/runs", "POST"),
        ("patch", "/api/runs/00000000-0000-0000-0000-000000000000/cancel", "POST"),
    ],
)
def test_a_method_the_route_does_not_take_is_a_json_405_with_allow(api, method, path, allowed):
    response = getattr(api.client, method)(path, headers=api.headers)
    error = assert_shape(response, 405, "method_not_allowed")
    assert response["Allow"] == allowed
    assert error["message"] == f"{method.upper()} is not allowed on {path}; allowed: {allowed}"


def test_a_crash_is_a_json_500_logged_and_not_shown(api, caplog):
    run_id = api.post("/api/workflows/approval/runs", {"key": ["k"]}).json()["id"]
    api.client.raise_request_exception = False

    response = api.post(f"/api/runs/{run_id}/actions/broken")

    error = assert_shape(response, 500, "internal_error")
    assert "secret internals" not in response.content.decode()
    assert error["message"] == "the server failed to answer this request; it has been logged"
    assert "the action's bug: secret internals here" in caplog.text  # in the log, with its traceback


def test_unknown_runs_and_jobs_say_so_without_python_reprs(api, client):
    job = assert_shape(client.get("/jobs/does-not-exist"), 404, "not_found")
    assert job["message"] == 'no job "does-not-exist"'
    run = assert_shape(api.get("/api/runs/does-not-exist"), 404, "not_found")
    assert run["message"] == 'no run with id "does-not-exist"'
    events = assert_shape(api.get("/api/runs/does-not-exist/events"), 404, "not_found")
    assert events["message"] == 'no run with id "does-not-exist"'


async def test_the_async_path_answers_the_same(async_client, api_key):
    headers = {"Authorization": f"Bearer {api_key}"}
    missing = await async_client.get("/api/nope", headers=headers)
    assert_shape(missing, 404, "not_found")
    refused = await async_client.delete("/jobs", headers=headers)
    assert_shape(refused, 405, "method_not_allowed")
    assert refused["Allow"] == "POST"


def test_other_pages_keep_djangos_errors(admin_client):
    response = admin_client.get("/dashboard/nope/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def test_a_refused_message_body_names_the_field_without_a_python_repr(api):
    run_id = api.post("/api/workflows/approval/runs", {"key": ["k"]}).json()["id"]
    response = api.post(f"/api/runs/{run_id}/messages", {"queue": "approve", "body": {"approved": 1.5}})
    error = assert_error(response, 422, "invalid_request")
    assert error["message"].startswith("invalid payload for queue approval.approve: approved: ")
    assert "[{" not in error["message"] and "('" not in error["message"]
    assert error["detail"][0]["loc"] == ["approved"]  # the structured detail is still there
