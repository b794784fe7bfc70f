"""A private PostgreSQL cluster for tests that cut off or restart the database.

Such a test must never touch the shared server: it starts its own cluster (initdb, as the
`postgres` user, on a free port, in a temporary folder), does what it likes to it, and stops it.
fsync is off: the tests measure survival of connection loss and restarts, not of power cuts.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest

from tests.support import free_port

PG_USER = "postgres"
BENCH_NET = "198.18.0.0/15"  # the only network besides loopback a cluster with `listen` trusts


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    raise FileNotFoundError(f"{name} not found (apt-get install postgresql)")


def needed_for(what: str) -> pytest.MarkDecorator:
    """Skip a test module unless the suite runs on PostgreSQL (CI's PostgreSQL pass) and a private
    cluster can be made here; `what` ends the reason ("a private cluster", ...)."""
    return pytest.mark.skipif(
        not (available() and os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))),
        reason="needs PostgreSQL: DATABASE_URL naming a PostgreSQL database (CI's PostgreSQL pass) and "
        f"initdb with a postgres user for {what}",
    )


def available() -> bool:
    """initdb exists and there is a `postgres` user to run it as."""
    try:
        _bin("initdb")
        pwd.getpwnam(PG_USER)
    except (FileNotFoundError, KeyError):
        return False
    return True


class PrivateCluster:
    """`start()`, then `url()` for DATABASE_URL; `terminate_backends()`, `restart()`, `stop()`.

    `listen`: more addresses to listen on besides 127.0.0.1 (the multi-host bed's veth addresses
    in 198.18.0.0/15, which must exist before `start()`); with it, pg_hba.conf also trusts clients
    from 198.18.0.0/15 (RFC 2544's benchmarking range, never routed beyond this machine)."""

    def __init__(
        self, *, max_connections: int = 100, listen: Sequence[str] = (), durable: bool = False
    ) -> None:
        """`durable`: PostgreSQL's own defaults (fsync, synchronous_commit, full_page_writes on),
        for benches whose figures must not be flattered; tests leave them off."""
        self.port = free_port()
        self.max_connections = max_connections
        self.listen = tuple(listen)
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="wf-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.socket_dir = self.root
        uid, gid = pwd.getpwnam(PG_USER).pw_uid, pwd.getpwnam(PG_USER).pw_gid
        os.chown(self.root, uid, gid)

    # --- lifecycle ---------------------------------------------------------------------------

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", PG_USER, "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> PrivateCluster:
        if not self.data.exists():
            self._as_postgres(_bin("initdb"), "-D", str(self.data), "-U", PG_USER, "-A", "trust", "--no-sync")
            if self.listen:
                with open(self.data / "pg_hba.conf", "a") as hba:
                    hba.write(f"host all all {BENCH_NET} trust\n")
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log), "-o", self._options())
        self._wait_ready()
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'app'").fetchone():
                conn.execute("CREATE DATABASE app")
        return self

    def _options(self) -> str:
        fast = "" if self.durable else " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        return (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses={','.join(('127.0.0.1', *self.listen))}"
            f"{fast} -c max_connections={self.max_connections}"
        )

    def _pg_ctl(self, *args: str) -> None:
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), *args)

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m fast`: every session is cut, the server is back in about a second."""
        self._pg_ctl("restart", "-w", "-t", "60", "-m", mode, "-l", str(self.log), "-o", self._options())
        self._wait_ready()

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)

    def start_again(self) -> None:
        """After `stop()`: the same data, the same port."""
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log), "-o", self._options())
        self._wait_ready()

    def destroy(self) -> None:
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    # --- use ---------------------------------------------------------------------------------

    def url(self, database: str = "app") -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def terminate_backends(self, database: str = "app") -> int:
        """Kill every client session of `database` (as an administrator would); returns how many."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone()
        return int(row[0]) if row else 0

    def query(self, sql: str, params: tuple = (), database: str = "app") -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()
