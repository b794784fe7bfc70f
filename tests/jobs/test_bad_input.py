"""POST /jobs with what PostgreSQL cannot store (a lone surrogate, NUL) or JSON nested too deep:
the same answers as /api/ (400 for a body too deep to parse, 422 naming the field), nothing started."""

from __future__ import annotations

import pytest

from jobs.models import IdempotencyKey
from tests.jobs.test_api import assert_error, assert_nothing_started, post_job
from workflows.http.parser import MAX_BODY_DEPTH
from workflows.models import Message

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 100_000])
def test_post__a_too_deep_body_is_400_naming_the_limit(client, depth):
    raw = '{"title": "x", "transcript": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    error = assert_error(post_job(client, raw), 400, "bad_request")

    assert f"nested more than {MAX_BODY_DEPTH} levels" in error["message"]
    assert_nothing_started()


@pytest.mark.parametrize(
    "body",
    [
        {"title": "Call \ud83d", "transcript": "x"},  # json.dumps sends it as the escape \ud83d
        {"title": "x", "transcript": "half a pair: \udfff"},
        {"title": "x", "transcript": "nul \x00"},
    ],
    ids=["title", "transcript", "nul"],
)
def test_post__unstorable_text_is_422_naming_the_field(client, body):
    for headers in ({}, {"Idempotency-Key": "k1"}):  # the key's body hash must not choke on it
        error = assert_error(post_job(client, body, **headers), 422, "invalid_request")
        [field] = [k for k, v in body.items() if v != "x"]
        assert [field] == [e["loc"][-1] for e in error["detail"]], error
    assert_nothing_started()
    assert not IdempotencyKey.objects.exists()


def test_post__a_surrogate_pair_is_one_character_and_fine(client):
    raw = '{"title": "call \\ud83d\\ude00", "transcript": "x"}'

    response = post_job(client, raw)

    assert response.status_code == 202, response.content
    assert Message.objects.get().body == {"title": "call \U0001f600", "transcript": "x"}
