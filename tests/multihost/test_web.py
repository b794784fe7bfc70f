"""The web host in its own namespace: daphne bound to its namespace address only, reached from
the machine over its link, starts runs through the generic API (`POST /api/workflows/chain/runs`
with an API key), and the runner hosts complete them."""

from __future__ import annotations

import httpx2

from .checks import assert_no_traceback, assert_runs_correct, chain_steps

RUNS = 10


def test_the_web_host_starts_runs_that_the_runner_hosts_complete(bed):
    bed.runners()
    web, base = bed.web()
    assert bed.control is not None
    token = bed.control.ask(op="apikey", name="multihost")["key"]
    keys = [f"web{i:02d}" for i in range(RUNS)]
    ids = []
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        for key in keys:
            answer = client.post(
                "/api/workflows/chain/runs", json={"key": [key], "state": {"steps": 3, "work": 0.1}}
            )
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
        assert_runs_correct(bed, chain_steps(dict.fromkeys(keys, 3)))
        for run_id in ids:
            answer = client.get(f"/api/runs/{run_id}")
            assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
        assert client.get("/api/runs").status_code == 200
        assert httpx2.get(f"{base}/api/runs", timeout=10).status_code == 401  # the key is what let us in
    assert_no_traceback(web)
