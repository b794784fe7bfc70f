"""Who may see which job: with JOBS_REQUIRE_API_KEY=1 jobs and Idempotency-Keys belong to the API
key that started them; without it /jobs stays open as before. And the stream token /jobs hands
out lets the job's client follow its run's WebSocket."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application
from inspector import access
from jobs.models import IdempotencyKey, JobOwner
from workflows.http.auth import create_api_key
from workflows.models import Event, Message, Run

GOOD = {"title": "Discovery call", "transcript": "Acme Corp called. I will send the deck."}
OTHER = {"title": "Another call", "transcript": "Initech called."}
TIMEOUT = 5


def post(client, body, key: str | None = None, idem: str | None = None):
    headers = {
        **({"Authorization": f"Bearer {key}"} if key else {}),
        **({"Idempotency-Key": idem} if idem else {}),
    }
    return client.post("/jobs", data=json.dumps(body), content_type="application/json", headers=headers)


def get(client, job_id: str, key: str | None = None):
    return client.get(f"/jobs/{job_id}", headers={"Authorization": f"Bearer {key}"} if key else {})


@pytest.fixture
def tenants(settings, db) -> tuple[str, str]:
    settings.JOBS_REQUIRE_API_KEY = True
    return create_api_key("tenant-a")[1], create_api_key("tenant-b")[1]


# --- with API keys: each tenant sees its own ---------------------------------------------------


@pytest.mark.django_db
def test_a_job_is_404_to_another_api_key(client, tenants):
    a, b = tenants
    job_id = post(client, GOOD, a).json()["jobId"]
    assert get(client, job_id, a).status_code == 200
    foreign = get(client, job_id, b)
    unknown = get(client, str(uuid.uuid4()), b)
    assert foreign.status_code == unknown.status_code == 404
    # Not even the message tells "exists, not yours" from "no such job".
    assert foreign.json()["error"]["message"].replace(job_id, "ID") == unknown.json()["error"][
        "message"
    ].replace(unknown.request["PATH_INFO"].rsplit("/", 1)[1], "ID")
    assert JobOwner.objects.get(job_id=job_id).api_key.name == "tenant-a"


@pytest.mark.django_db
def test_idempotency_keys_are_per_api_key(client, tenants):
    a, b = tenants
    first = post(client, GOOD, a, idem="k1")
    # B repeating A's key (same body or not) starts B's own job: it neither reads A's nor gets 422.
    b_same = post(client, GOOD, b, idem="k1")
    b_other = post(client, OTHER, b, idem="k1")
    assert first.status_code == b_same.status_code == 202 and b_other.status_code == 422
    assert b_same.json()["jobId"] != first.json()["jobId"]
    assert post(client, GOOD, a, idem="k1").json()["jobId"] == first.json()["jobId"]  # A's repeat: A's job
    assert post(client, OTHER, a, idem="k1").status_code == 422
    # B cannot claim A's future keys: B uses one first, A's later use is A's own job.
    b_future = post(client, GOOD, b, idem="k2").json()["jobId"]
    a_future = post(client, GOOD, a, idem="k2").json()["jobId"]
    assert a_future != b_future
    assert get(client, a_future, a).status_code == 200 and get(client, a_future, b).status_code == 404
    assert Run.objects.filter(workflow="aiJob").count() == 4
    assert IdempotencyKey.objects.filter(key="k1").count() == 2


@pytest.mark.django_db
def test_jobs_started_while_open_are_nobodys_once_keys_are_required(client, settings):
    job_id = post(client, GOOD).json()["jobId"]
    settings.JOBS_REQUIRE_API_KEY = True
    _row, key = create_api_key("late")
    assert get(client, job_id, key).status_code == 404
    assert not JobOwner.objects.exists()


@pytest.mark.django_db
def test_the_owner_is_written_with_the_start_or_not_at_all(client, tenants, start_fails_after_writing):
    client.raise_request_exception = False
    assert post(client, GOOD, tenants[0], idem="k").status_code == 500
    assert not (Run.objects.exists() or Message.objects.exists() or JobOwner.objects.exists())
    assert not IdempotencyKey.objects.exists()


# --- without API keys: open, as the contract says --------------------------------------------------


@pytest.mark.django_db
def test_open_jobs_share_one_namespace_as_before(client):
    first = post(client, GOOD, idem="k1")
    assert post(client, GOOD, idem="k1").json()["jobId"] == first.json()["jobId"]
    assert post(client, OTHER, idem="k1").status_code == 422
    assert get(client, first.json()["jobId"]).status_code == 200
    assert not JobOwner.objects.exists()


@pytest.mark.django_db
def test_post_and_get_hand_out_a_token_for_the_jobs_run(client):
    created = post(client, GOOD, idem="k1").json()
    run = Run.objects.get(workflow="aiJob")
    assert created["runId"] == str(run.id)
    assert access.check_run_stream_token(str(run.id), created["streamToken"])
    again = post(client, GOOD, idem="k1").json()  # a repeat answers with the same run
    assert again["runId"] == str(run.id) and access.check_run_stream_token(str(run.id), again["streamToken"])
    read = get(client, created["jobId"]).json()
    assert access.check_run_stream_token(str(run.id), read["streamToken"])
    assert not access.check_run_stream_token(str(uuid.uuid4()), read["streamToken"])


@pytest.mark.django_db
def test_no_token_when_the_stream_takes_none(client, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RUN_STREAM_AUTH": "session"}
    created = post(client, GOOD).json()
    assert created["streamToken"] is None
    assert get(client, created["jobId"]).json()["streamToken"] is None


@pytest.mark.django_db(transaction=True)
async def test_the_jobs_client_follows_its_run_with_the_token():
    """The example's client, anonymous: POST /jobs, then the run's events with the token."""
    created = json.loads(await database_sync_to_async(lambda: post(Client(), GOOD).content)())
    run_id = created["runId"]
    await database_sync_to_async(Event.objects.create)(
        run_id=run_id, name="progress", payload={"stage": "extracting"}, created_at=_now()
    )
    headers = [(b"origin", b"http://localhost:8000"), (b"host", b"localhost:8000")]
    refused = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
    assert (await refused.connect(timeout=TIMEOUT))[0]
    assert (await refused.receive_output(TIMEOUT))["code"] == 4403
    ws = WebsocketCommunicator(
        application, f"/ws/runs/{run_id}/?token={created['streamToken']}", headers=headers
    )
    assert (await ws.connect(timeout=TIMEOUT))[0]
    event = await ws.receive_json_from(timeout=TIMEOUT)
    assert (event["event"], event["data"]) == ("progress", {"stage": "extracting"})
    await ws.disconnect()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
