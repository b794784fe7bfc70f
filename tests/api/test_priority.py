"""POST /api/workflows/{name}/runs with `priority`: kept with the run it creates and shown in its
reads; a priority that is not a whole number from -100 to 100 is 422 and stores nothing."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, counts
from workflows.models import Run

URL = "/api/workflows/approval/runs"


def test_priority__kept_with_the_new_run_and_shown_in_its_reads(api):
    created = api.post(URL, {"key": ["urgent"], "priority": 40})
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["priority"], body["concurrency_group"]) == (40, None)
    assert Run.objects.get(id=body["id"]).priority == 40
    assert api.get(f"/api/runs/{body['id']}").json()["priority"] == 40
    assert api.post(URL, {"key": ["plain"]}).json()["priority"] == 0


@pytest.mark.parametrize("priority", [101, -101, "5", True, 1.5, None])
def test_a_bad_priority_is_422_and_stores_nothing(api, priority):
    before = counts()

    response = api.post(URL, {"key": ["k"], "priority": priority})

    error = assert_error(response, 422, "invalid_request")
    assert "priority" in str(error["detail"]), error
    assert counts() == before
