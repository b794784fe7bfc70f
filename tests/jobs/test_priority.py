"""POST /jobs with a `priority` (-100..100): the job's run takes it (higher jobs start first);
a bad one is 422 in the one error shape and starts nothing."""

from __future__ import annotations

import pytest

from tests.jobs.test_api import GOOD, assert_error, assert_nothing_started, post_job
from workflows.models import Message, Run

pytestmark = pytest.mark.django_db


def test_priority__the_jobs_run_takes_it_and_the_start_message_stays_as_it_was(client):
    response = post_job(client, {**GOOD, "priority": 25})

    assert response.status_code == 202, response.content
    run = Run.objects.get(workflow="aiJob")
    assert run.key == [response.json()["jobId"]] and run.priority == 25
    assert Message.objects.get(run=run).body == GOOD  # the message is the job, not its priority


def test_priority__defaults_to_0(client):
    assert post_job(client, GOOD).status_code == 202
    assert Run.objects.get(workflow="aiJob").priority == 0


@pytest.mark.parametrize("priority", [101, -101, "high", True, 2.5, None, [1]])
def test_priority__a_bad_one_is_422_naming_it_and_starts_nothing(client, priority):
    error = assert_error(post_job(client, {**GOOD, "priority": priority}), 422, "invalid_request")

    assert [e["loc"] for e in error["detail"]] == [["body", "priority"]], error
    assert "-100 to 100" in error["detail"][0]["msg"]
    assert_nothing_started()


def test_priority__an_idempotency_key_repeated_with_another_priority_is_a_conflict(client):
    first = post_job(client, {**GOOD, "priority": 5}, **{"Idempotency-Key": "k-1"})
    assert first.status_code == 202
    again = post_job(client, {**GOOD, "priority": 5}, **{"Idempotency-Key": "k-1"})
    assert again.json()["jobId"] == first.json()["jobId"]
    assert post_job(client, {**GOOD, "priority": 6}, **{"Idempotency-Key": "k-1"}).status_code == 422
