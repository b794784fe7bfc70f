"""A job whose run was pruned (WORKFLOWS["RETENTION"]): GET is 404 like an unknown job, and its
Idempotency-Key has expired with it, so a repeat starts a new job instead of failing."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from jobs.models import IdempotencyKey
from tests.jobs.test_api import GOOD, post_job
from workflows.core.retention import Retention
from workflows.models import Run
from workflows.storage.django.prune import prune

pytestmark = pytest.mark.django_db


def prune_the_job(job_id: str) -> None:
    finished = timezone.now() - dt.timedelta(days=40)
    Run.objects.filter(key=[job_id]).update(status="completed", finished_at=finished, created_at=finished)
    assert prune(Retention(days={"completed": 30})).total_runs == 1


def test_a_pruned_job_is_404_and_its_idempotency_key_starts_a_new_job(client):
    first = post_job(client, GOOD, **{"Idempotency-Key": "k1"}).json()["jobId"]
    prune_the_job(first)
    assert client.get(f"/jobs/{first}").status_code == 404

    other_body = {**GOOD, "title": "Another call"}
    response = post_job(client, other_body, **{"Idempotency-Key": "k1"})
    assert response.status_code == 202, response.content
    second = response.json()["jobId"]
    assert second != first and Run.objects.get(key=[second]).status == "pending"
    assert IdempotencyKey.objects.get(key="k1").job_id.hex == second.replace("-", "")
    # and the key works as before for the new job
    assert post_job(client, other_body, **{"Idempotency-Key": "k1"}).json()["jobId"] == second
    assert post_job(client, GOOD, **{"Idempotency-Key": "k1"}).status_code == 422
