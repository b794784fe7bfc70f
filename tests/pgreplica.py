"""A streaming standby of a tests/pgcluster.PrivateCluster, for tests of reads off a replica.

`pg_basebackup -R` copies the primary into a folder of its own (as the `postgres` user) and writes
the standby's connection to it; the standby starts on another free port and replays the primary's
WAL as it streams in. A PrivateCluster serves as the primary as it is: initdb's defaults already
allow it (wal_level=replica, max_wal_senders=10, pg_hba.conf's `replication` lines for loopback).
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import time
from pathlib import Path

import psycopg

from tests.pgcluster import PG_USER, PrivateCluster, _bin
from tests.support import free_port


class Standby:
    """`start()`, `url()`, `pause()` / `resume()` its replay, `wait_caught_up()`, `destroy()`."""

    def __init__(self, primary: PrivateCluster) -> None:
        self.primary = primary
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="wf-pg-standby-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        uid, gid = pwd.getpwnam(PG_USER).pw_uid, pwd.getpwnam(PG_USER).pw_gid
        os.chown(self.root, uid, gid)

    def start(self) -> Standby:
        self.primary._as_postgres(
            _bin("pg_basebackup"),
            "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", PG_USER,
            "-D", str(self.data), "-R", "-X", "stream", "--no-sync", "-c", "fast",
        )  # fmt: skip
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.log), "-o", self._options())
        self.wait_caught_up()
        return self

    def _options(self) -> str:
        # max_connections must be at least the primary's for a standby to start.
        return (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            f" -c hot_standby=on -c max_connections={self.primary.max_connections}"
        )

    def _pg_ctl(self, *args: str) -> None:
        self.primary._as_postgres(_bin("pg_ctl"), "-D", str(self.data), *args)

    def stop(self) -> None:
        self._pg_ctl("stop", "-w", "-t", "60", "-m", "fast")

    def destroy(self) -> None:
        self.primary._as_postgres(
            _bin("pg_ctl"), "-D", str(self.data), "stop", "-m", "immediate", check=False
        )
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "app") -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def query(self, sql: str) -> list[tuple]:
        with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql).fetchall()

    def pause(self) -> None:
        self.query("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self.query("SELECT pg_wal_replay_resume()")

    def wait_caught_up(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        self._wait_for("pg_last_wal_replay_lsn()", timeout)

    def wait_received(self, timeout: float = 30.0) -> None:
        """Until the standby has received (not necessarily replayed) all the primary wrote so far."""
        self._wait_for("pg_last_wal_receive_lsn()", timeout)

    def _wait_for(self, position: str, timeout: float) -> None:
        # The insert position: with synchronous_commit=off a commit may not be written out yet.
        target = self.primary.query("SELECT pg_current_wal_insert_lsn()::text", database="postgres")[0][0]
        deadline = time.monotonic() + timeout
        while True:
            try:
                done = self.query(f"SELECT {position} >= '{target}'::pg_lsn")[0][0]
            except psycopg.OperationalError:  # still starting
                done = False
            if done:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby's {position} did not reach {target} in {timeout} s")
            time.sleep(0.05)
