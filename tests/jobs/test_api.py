"""POST /jobs and GET /jobs/{id}: answers, idempotency, and every bad request refused in the one
error shape with nothing started."""

from __future__ import annotations

import json
import uuid

import pytest

from inspector.access import check_run_stream_token
from jobs.models import IdempotencyKey
from workflows.http.auth import create_api_key
from workflows.models import Message, Run

pytestmark = pytest.mark.django_db

GOOD = {"title": "Discovery call", "transcript": "Acme Corp called. I will send the deck."}


def post_job(client, body, **headers):
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post("/jobs", data=data, content_type="application/json", headers=headers)


def job(response) -> tuple[str, str]:
    """The job an answer names: its job id and run id (its stream token is signed per second)."""
    return response.json()["jobId"], response.json()["runId"]


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "detail"}, body
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body["error"]


def assert_nothing_started():
    assert Run.objects.count() == 0
    assert Message.objects.count() == 0


def test_post__202_with_the_job_id_once_the_start_message_is_stored(client):
    response = post_job(client, GOOD)

    assert response.status_code == 202
    job_id = response.json()["jobId"]
    assert str(uuid.UUID(job_id)) == job_id
    run = Run.objects.get(workflow="aiJob")
    assert run.key == [job_id]
    message = Message.objects.get(run=run)
    assert (message.queue, message.body) == ("start", GOOD)


def test_get__the_job_with_its_run_status_and_state(client):
    job_id = post_job(client, GOOD).json()["jobId"]
    response = client.get(f"/jobs/{job_id}")

    assert response.status_code == 200
    body = response.json()
    run = Run.objects.get(workflow="aiJob")
    assert body == {
        "jobId": job_id,
        "runId": str(run.id),
        "status": run.status,
        "stage": "queued",
        "detail": None,
        "nextAttemptAt": None,
        "state": run.state,
        "streamToken": body["streamToken"],  # tests/jobs/test_access.py checks it
    }
    assert body["state"]["stage"] == "queued"


@pytest.mark.parametrize("job_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_get__unknown_job_is_404(client, job_id):
    assert_error(client.get(f"/jobs/{job_id}"), 404, "not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"transcript": "x"}, "title"),
        ({"title": "x"}, "transcript"),
        ({}, "title"),
        ({"title": "", "transcript": "x"}, "title"),
        ({"title": "   ", "transcript": "x"}, "title"),
        ({"title": "x", "transcript": ""}, "transcript"),
        ({"title": "x", "transcript": "\n\t "}, "transcript"),
        ({"title": 42, "transcript": "x"}, "title"),
        ({"title": "x", "transcript": ["a", "b"]}, "transcript"),
        ({"title": None, "transcript": "x"}, "title"),
        ({"title": True, "transcript": "x"}, "title"),
        ({"title": "x", "transcript": {"text": "y"}}, "transcript"),
        ({**GOOD, "priority": "high"}, "priority"),
        ({"title": "x" * 501, "transcript": "x"}, "title"),
        ({"title": "x", "transcript": "a\u0000b"}, "transcript"),
    ],
)
def test_post__missing_empty_mistyped_or_unknown_fields_are_422(client, body, field):
    error = assert_error(post_job(client, body), 422, "invalid_request")
    assert field in [e["loc"][-1] for e in error["detail"]]
    assert_nothing_started()


@pytest.mark.parametrize("body", ["[]", '["title", "transcript"]', '"a string"', "42", "null", "true"])
def test_post__a_body_that_is_not_an_object_is_422(client, body):
    error = assert_error(post_job(client, body), 422, "invalid_request")
    assert error["detail"][0]["msg"] == "the body must be a JSON object"
    assert_nothing_started()


@pytest.mark.parametrize("body", [b"", b"{", b"title=x&transcript=y", b'{"title": "x",}', b"\xff\xfe"])
def test_post__a_body_that_is_not_json_is_400(client, body):
    assert_error(post_job(client, body), 400, "bad_request")
    assert_nothing_started()


def test_post__a_body_over_the_limit_is_413(client, settings):
    settings.JOBS_MAX_BODY_BYTES = 1000
    big = {"title": "x", "transcript": "y" * 1000}
    error = assert_error(post_job(client, big), 413, "bad_request")
    assert "1000 bytes" in error["message"]
    assert_nothing_started()
    assert post_job(client, {"title": "x", "transcript": "y" * 900}).status_code == 202


def test_post__the_default_limit_is_one_mebibyte(client):
    big = {"title": "x", "transcript": "y" * (1024 * 1024)}
    assert_error(post_job(client, big), 413, "bad_request")
    assert_nothing_started()


def test_idempotency_key__the_same_key_returns_the_same_job(client):
    first = post_job(client, GOOD, **{"Idempotency-Key": "abc"})
    again = post_job(client, GOOD, **{"Idempotency-Key": "abc"})
    other = post_job(client, GOOD, **{"Idempotency-Key": "def"})

    assert first.status_code == again.status_code == other.status_code == 202
    assert job(first) == job(again) != job(other)
    # each answer carries a stream token for that run, signed when it was made (its second)
    assert all(check_run_stream_token(r.json()["runId"], r.json()["streamToken"]) for r in (first, again))
    assert Run.objects.count() == 2
    assert Message.objects.count() == 2
    assert IdempotencyKey.objects.get(key="abc").job_id == uuid.UUID(first.json()["jobId"])


def test_idempotency_key__the_same_key_with_another_body_is_422(client):
    first = post_job(client, GOOD, **{"Idempotency-Key": "abc"})
    changed = post_job(client, {**GOOD, "title": "Another call"}, **{"Idempotency-Key": "abc"})

    assert first.status_code == 202
    error = assert_error(changed, 422, "invalid_request")
    assert "Idempotency-Key" in error["message"]
    assert Run.objects.count() == 1


@pytest.mark.parametrize("key", ["", "   ", "k" * 256])
def test_idempotency_key__empty_or_too_long_is_422(client, key):
    assert_error(post_job(client, GOOD, **{"Idempotency-Key": key}), 422, "invalid_request")
    assert_nothing_started()
    assert IdempotencyKey.objects.count() == 0


def test_idempotency_key__a_refused_body_does_not_claim_the_key(client):
    assert post_job(client, {"title": "x"}, **{"Idempotency-Key": "abc"}).status_code == 422
    assert post_job(client, GOOD, **{"Idempotency-Key": "abc"}).status_code == 202


def test_a_failed_start_leaves_nothing(client, start_fails_after_writing):
    client.raise_request_exception = False
    response = post_job(client, GOOD, **{"Idempotency-Key": "abc"})
    assert response.status_code == 500
    assert_nothing_started()
    assert IdempotencyKey.objects.count() == 0


def test_jobs_are_open_unless_an_api_key_is_required(client, settings):
    assert post_job(client, GOOD).status_code == 202
    settings.JOBS_REQUIRE_API_KEY = True
    assert_error(post_job(client, GOOD), 401, "unauthorized")
    assert_error(client.get(f"/jobs/{uuid.uuid4()}"), 401, "unauthorized")
    assert_error(post_job(client, GOOD, Authorization="Bearer wf_not-a-real-key-at-all"), 401, "unauthorized")
    _row, key = create_api_key("jobs-client")
    response = post_job(client, GOOD, Authorization=f"Bearer {key}")
    assert response.status_code == 202
    assert (
        client.get(
            f"/jobs/{response.json()['jobId']}", headers={"Authorization": f"Bearer {key}"}
        ).status_code
        == 200
    )
    assert Run.objects.count() == 2


def test_openapi_documents_the_jobs_routes(client):
    schema = client.get("/api/openapi.json").json()
    post = schema["paths"]["/jobs"]["post"]
    assert set(post["requestBody"]["content"]["application/json"]["schema"]["required"]) == {
        "title",
        "transcript",
    }
    assert {"202", "400", "413", "422"} <= set(post["responses"])
    assert "404" in schema["paths"]["/jobs/{job_id}"]["get"]["responses"]
