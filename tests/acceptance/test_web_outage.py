"""The web tier when its database goes away or runs short of connections: real daphne processes
on a private PostgreSQL cluster (tests/pgcluster.py) that the test stops and starts again.

Every failure must be `503 {"error": {"code": "unavailable", ...}}` with `Retry-After`, never
Django's HTML 500 page; a POST /jobs that failed stored nothing, and repeating it with the same
Idempotency-Key once the database is back makes exactly one job.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from jobs.processes import Child
from tests import pgcluster
from tests.support import free_port, manage, wait_for

ROOT = Path(__file__).resolve().parents[2]
BODY = {"title": "Outage call", "transcript": "We talked about the outage."}

pytestmark = [
    # The test process itself needs no database, but the suite's session fixtures expect the test
    # database to exist (pytest-django creates it only for a session that asks for it).
    pytest.mark.django_db,
    pgcluster.needed_for("a private cluster"),
]


def _env(cluster: pgcluster.PrivateCluster, **pool: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": cluster.url(),
            "DATABASE_POOL": "1",
            "DATABASE_POOL_MIN_SIZE": "1",
            "DATABASE_POOL_MAX_SIZE": "4",
            "DATABASE_POOL_TIMEOUT": "0.5",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(pool)
    return env


def _manage(cluster: pgcluster.PrivateCluster, *args: str) -> str:
    return manage(_env(cluster), *args)


def _daphne(cluster: pgcluster.PrivateCluster, log: Path, **pool: str) -> tuple[Child, str]:
    port = free_port()
    child = Child(
        "daphne",
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        env=_env(cluster, **pool),
        log=log,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if not child.running():
            raise AssertionError(f"daphne exited ({child.process.returncode}):\n{child.output()}")
        try:
            return httpx2.get(f"{base}/api/openapi.json", timeout=2).status_code == 200
        except httpx2.HTTPError:
            return False

    try:
        wait_for(up, 120, "daphne to serve")
    except BaseException:
        child.stop()  # never left running
        raise
    return child, base


@pytest.fixture(scope="module")
def cluster() -> Iterator[pgcluster.PrivateCluster]:
    cluster = pgcluster.PrivateCluster().start()
    try:
        _manage(cluster, "migrate", "--verbosity", "0")
        yield cluster
    finally:
        cluster.destroy()


def assert_unavailable(response: httpx2.Response) -> None:
    """503 in the one JSON error shape, with a small Retry-After."""
    assert response.status_code == 503, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    error = response.json()["error"]
    assert (error["code"], error["detail"]) == ("unavailable", None)
    assert error["message"]
    assert 1 <= int(response.headers["Retry-After"]) <= 5


def test_database_outage__answers_503_json_and_a_retried_post_makes_one_job(cluster, tmp_path):
    key = re.search(r"wf_\S+", _manage(cluster, "workflows", "apikey", "create", "outage")).group(0)
    daphne, base = _daphne(cluster, tmp_path / "daphne.log")
    try:
        with httpx2.Client(base_url=base, timeout=30) as http:
            created = http.post("/jobs", json=BODY, headers={"Idempotency-Key": "before"})
            assert created.status_code == 202, created.text
            job_id = created.json()["jobId"]
            run_id = http.get(f"/jobs/{job_id}").json()["runId"]

            cluster.stop()

            assert_unavailable(http.post("/jobs", json=BODY, headers={"Idempotency-Key": "during"}))
            assert_unavailable(http.get(f"/jobs/{job_id}"))
            assert_unavailable(http.get(f"/api/runs/{run_id}", headers={"Authorization": f"Bearer {key}"}))
            assert_unavailable(http.get("/api/runs", headers={"Authorization": f"Bearer {key}"}))

            cluster.start_again()

            def retried() -> httpx2.Response | None:
                response = http.post("/jobs", json=BODY, headers={"Idempotency-Key": "during"})
                if response.status_code == 503:  # the pool reconnects within its reconnect_timeout
                    assert_unavailable(response)
                    return None
                return response

            response = wait_for(retried, 30, "POST /jobs to succeed once the database is back")
            assert response.status_code == 202, response.text
            # A repeat reads the key's job through Django's pool, which may still be reconnecting
            # when the first POST went out on the web process's own connection: 503 until it is.
            again = wait_for(retried, 30, "the repeated POST /jobs to succeed")
            # the same job, not a second one (each answer's stream token is signed in its own second)
            assert (again.json()["jobId"], again.json()["runId"]) == (
                response.json()["jobId"],
                response.json()["runId"],
            )
            assert http.get(f"/jobs/{job_id}").status_code == 200
    finally:
        daphne.stop()
    assert "Internal Server Error" not in daphne.output(50_000)

    rows = cluster.query("SELECT job_id FROM jobs_idempotencykey WHERE key = %s", ("during",))
    assert [str(r[0]) for r in rows] == [response.json()["jobId"]]
    runs = cluster.query("SELECT count(*) FROM workflows_run WHERE key_text LIKE %s", (f"%{rows[0][0]}%",))
    assert runs == [(1,)]
    messages = cluster.query(
        "SELECT count(*) FROM workflows_message m JOIN workflows_run r ON r.id = m.run_id"
        " WHERE r.key_text LIKE %s",
        (f"%{rows[0][0]}%",),
    )
    assert messages == [(1,)]  # its one start message


def test_tiny_pool_under_a_burst__answers_2xx_or_503_json_never_500(cluster, tmp_path):
    daphne, base = _daphne(
        cluster,
        tmp_path / "daphne.log",
        DATABASE_POOL_MIN_SIZE="1",
        DATABASE_POOL_MAX_SIZE="2",
        DATABASE_POOL_TIMEOUT="0.05",
    )

    async def burst() -> list[httpx2.Response]:
        limits = httpx2.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx2.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
            return await asyncio.gather(
                *(http.post("/jobs", json=BODY, headers={"Idempotency-Key": f"burst-{i}"}) for i in range(60))
            )

    try:
        responses = asyncio.run(burst())
    finally:
        daphne.stop()
    assert "Internal Server Error" not in daphne.output(50_000)
    statuses = sorted(r.status_code for r in responses)
    for response in responses:
        if response.status_code != 202:
            assert_unavailable(response)
    assert 202 in statuses, statuses
    accepted = sum(1 for s in statuses if s == 202)
    rows = cluster.query("SELECT count(*) FROM jobs_idempotencykey WHERE key LIKE %s", ("burst-%",))
    assert rows == [(accepted,)]  # a 503 stored nothing
