"""PostgreSQL-side helpers of `bench/side_by_side.py` (plain psycopg, no Django, no DBOS): the
physical floor, server settings, and the per-database statistics window that gives statements,
transactions, WAL bytes, tuple writes and index insertions of a batch of work.

How a window is read (PostgreSQL 15):
- tuple writes and transactions come from `pg_stat_user_tables` / `pg_stat_database`. A backend
  publishes its counters at most once a second while busy and up to 10 s late while idle, but
  always when it exits: every window therefore starts and ends with the measured system's
  connections closed, and the counters are read from a new connection until they stop moving;
- WAL bytes: `pg_current_wal_lsn()` differences are server-wide (other databases' writes on a
  shared server land in them too), so when `pg_walinspect` can be created the window also sums
  the WAL records that touch this database's relations plus the records of the same
  transactions (their commit records), which is this database's share alone;
- index insertions: PostgreSQL 15 keeps no per-index insertion counter. Every inserted row and
  every non-HOT update adds one entry to each index of its table, a HOT update adds none, so the
  estimate is sum over tables of (n_tup_ins + n_tup_upd - n_tup_hot_upd) x indexes of the table
  (an upper bound: a partial index skips rows outside its predicate).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import psycopg

from . import _machine
from ._common import stats_ms


def floor(url: str, n: int) -> dict[str, Any]:
    """One committed single-row INSERT on one autocommit connection, timed each (plain psycopg,
    the same for both systems)."""
    samples: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_sbs_floor")
        conn.execute("CREATE TABLE bench_sbs_floor (id bigserial PRIMARY KEY, v integer NOT NULL)")
        for i in range(n + 20):
            t0 = time.perf_counter()
            conn.execute("INSERT INTO bench_sbs_floor (v) VALUES (%s)", [i])
            elapsed = time.perf_counter() - t0
            if i >= 20:  # warm-up
                samples.append(elapsed)
        conn.execute("DROP TABLE bench_sbs_floor")
    out: dict[str, Any] = stats_ms(samples)
    out["per_s"] = len(samples) / sum(samples)
    return out


def submits_beside_floor(
    url: str, n: int, submit: Callable[[int], object], warmup: int = 3
) -> dict[str, Any]:
    """`submit(i)` timed alone n times (after `warmup` untimed), 15 ms apart, while a system's
    workers are busy. 5 ms after each, the floor insert on a connection of its own, timed the same
    way: how much that system's busy workers slow any commit on the machine, to read its submit
    figure against; 5 ms later the same insert on a connection that does not wait for its WAL
    flush (`synchronous_commit = off`): how much of that is the wait for the flush. Returns the
    submits' stats_ms, the inserts' under "floor" and "floor_no_flush_wait", and under "machine"
    how busy the CPUs and PostgreSQL's disk were meanwhile (`bench/_machine.py`): whether that
    wait is the disk's or a CPU's."""
    timed: dict[str, list[float]] = {"submit": [], "floor": [], "floor_no_flush_wait": []}
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as no_wait:
        no_wait.execute("SET synchronous_commit = off")
        conn.execute("CREATE TABLE IF NOT EXISTS bench_sbs_busy_floor (id bigserial PRIMARY KEY, v integer)")
        insert = "INSERT INTO bench_sbs_busy_floor (v) VALUES (%s)"
        device = _machine.server_data_device(conn)
        before = _machine.snapshot(device)
        for i in range(n + warmup):
            for name, call in (
                ("submit", partial(submit, i)),
                ("floor", partial(conn.execute, insert, [i])),
                ("floor_no_flush_wait", partial(no_wait.execute, insert, [i])),
            ):
                t0 = time.perf_counter()
                call()
                elapsed = time.perf_counter() - t0
                if i >= warmup:
                    timed[name].append(elapsed)
                time.sleep(0.005)
        machine = _machine.window(before, _machine.snapshot(device))
        conn.execute("DROP TABLE bench_sbs_busy_floor")
    out: dict[str, Any] = stats_ms(timed["submit"])
    out["floor"] = stats_ms(timed["floor"])
    out["floor_no_flush_wait"] = stats_ms(timed["floor_no_flush_wait"])
    out["machine"] = machine
    return out


def checkpoint(url: str) -> None:
    """A CHECKPOINT (superuser): a system's timed figures start with the dirty pages of its new
    database and migrations written out, not competing with its commits for the disk. Each system
    gets one after its last DDL and before its first timed figure."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def server_info(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]
            for name in (
                "fsync",
                "synchronous_commit",
                "wal_sync_method",
                "full_page_writes",
                "shared_buffers",
            )
        }
        try:
            preload = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        except psycopg.Error:
            preload = ""
    return {"version": version, **settings, "pg_stat_statements_loaded": "pg_stat_statements" in preload}


def enable_walinspect(url: str) -> bool:
    """`CREATE EXTENSION pg_walinspect` in the (bench-owned) database; False when unavailable."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        return True
    except psycopg.Error:
        return False


_TABLES = """
SELECT s.schemaname || '.' || s.relname, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
       (SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid)
FROM pg_stat_user_tables s
"""


_SNAPSHOTS = 0  # snapshot connections made so far: each is one committed transaction of its own


def snapshot(url: str) -> dict[str, Any]:
    """This database's counters now, read in one transaction of a new connection (so no cached
    statistics snapshot, and exactly one transaction of ours in `xact_commit`)."""
    global _SNAPSHOTS
    _SNAPSHOTS += 1
    with psycopg.connect(url) as conn:
        tables = {
            name: {"ins": ins, "upd": upd, "hot_upd": hot, "del": dele, "indexes": nidx}
            for name, ins, upd, hot, dele, nidx in conn.execute(_TABLES).fetchall()
        }
        xact = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    return {"tables": tables, "xact_commit": xact[0], "lsn": lsn, "seq": _SNAPSHOTS}


def settled_snapshot(url: str, *, timeout: float = 15.0) -> dict[str, Any]:
    """A snapshot once the table counters stopped moving (the measured connections are closed:
    their exit publishes their counters, a moment later)."""
    time.sleep(0.2)
    previous = snapshot(url)
    deadline = time.monotonic() + timeout
    while True:
        time.sleep(0.3)
        current = snapshot(url)
        if current["tables"] == previous["tables"] or time.monotonic() > deadline:
            return current
        previous = current


_WAL_OF_DB = """
WITH r AS (
    SELECT xid, record_length, block_ref FROM pg_get_wal_records_info(%(a)s::pg_lsn, %(b)s::pg_lsn)
), mine AS (
    SELECT DISTINCT xid FROM r WHERE block_ref ~ %(rel)s AND xid <> '0'::xid
)
SELECT coalesce(sum(record_length) FILTER (WHERE block_ref ~ %(rel)s OR xid IN (SELECT xid FROM mine)), 0),
       coalesce(sum(record_length), 0),
       count(*) FILTER (WHERE block_ref ~ %(rel)s OR xid IN (SELECT xid FROM mine))
FROM r
"""


# The same records by what they touch: the relation of their first block (a table or an index of
# this database; its row locks apart, such as a foreign key check takes), else their kind (a
# transaction's commit record has no block).
_WAL_OF_DB_BY_RELATION = """
WITH r AS (
    SELECT xid, resource_manager, record_type, record_length, block_ref
    FROM pg_get_wal_records_info(%(a)s::pg_lsn, %(b)s::pg_lsn)
), mine AS (
    SELECT DISTINCT xid FROM r WHERE block_ref ~ %(rel)s AND xid <> '0'::xid
), ours AS (
    SELECT record_length, resource_manager, record_type, substring(block_ref FROM %(node)s) AS node
    FROM r WHERE block_ref ~ %(rel)s OR xid IN (SELECT xid FROM mine)
), names AS (
    SELECT pg_relation_filenode(oid)::text AS node, relname FROM pg_class
    WHERE pg_relation_filenode(oid) IS NOT NULL
)
SELECT coalesce(names.relname, CASE WHEN ours.node IS NULL
                                    THEN ours.resource_manager || ' ' || ours.record_type
                                    ELSE 'relfilenode ' || ours.node END)
       || CASE WHEN ours.record_type LIKE 'LOCK%%' THEN ' (row locks)' ELSE '' END,
       sum(ours.record_length)
FROM ours LEFT JOIN names ON names.node = ours.node
GROUP BY 1
"""


def wal_of_database(url: str, start_lsn: str, end_lsn: str) -> dict[str, Any] | None:
    """The WAL records between two LSNs that belong to this database (see the module docstring);
    None when pg_walinspect is not there."""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT %s::pg_lsn >= %s::pg_lsn", [start_lsn, end_lsn]).fetchone()[0]:
                # Nothing written (pg_walinspect refuses an empty range): an empty window.
                return {"bytes": 0, "records": 0, "all_databases_bytes": 0, "by_relation": {}}
            oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
            # The end must be flushed before pg_walinspect reads it.
            for _ in range(50):
                flushed = conn.execute(
                    "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", [end_lsn]
                ).fetchone()[0]
                if flushed:
                    break
                time.sleep(0.1)
            params = {
                "a": start_lsn,
                "b": end_lsn,
                "rel": f"rel [0-9]+/{oid}/",
                "node": f"rel [0-9]+/{oid}/([0-9]+)",
            }
            mine, total, records = conn.execute(_WAL_OF_DB, params).fetchone()
            by_relation = {
                name: int(n) for name, n in conn.execute(_WAL_OF_DB_BY_RELATION, params).fetchall()
            }
    except psycopg.Error:
        return None
    return {
        "bytes": int(mine),
        "records": int(records),
        "all_databases_bytes": int(total),
        "by_relation": by_relation,
    }


def lsn_diff(url: str, start_lsn: str, end_lsn: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT %s::pg_lsn - %s::pg_lsn", [end_lsn, start_lsn]).fetchone()[0])


def window(url: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What happened in this database between two settled snapshots."""
    tables: dict[str, dict[str, int]] = {}
    index_inserts = 0
    for name, end in after["tables"].items():
        start = before["tables"].get(name, {"ins": 0, "upd": 0, "hot_upd": 0, "del": 0})
        delta = {k: end[k] - start[k] for k in ("ins", "upd", "hot_upd", "del")}
        if any(delta.values()):
            tables[name] = {**delta, "indexes": end["indexes"]}
        index_inserts += (delta["ins"] + delta["upd"] - delta["hot_upd"]) * end["indexes"]
    return {
        "tables": tables,
        "index_inserts_est": index_inserts,
        # less our own snapshot transactions in between (one each, see snapshot())
        "xact_commit": after["xact_commit"] - before["xact_commit"] - (after["seq"] - before["seq"]),
        "wal_lsn_bytes_server": lsn_diff(url, before["lsn"], after["lsn"]),
        "wal_db": wal_of_database(url, before["lsn"], after["lsn"]),
    }


def wait_count(
    count: Callable[[], int], target: int, *, what: str, stall: float = 60.0, interval: float = 0.1
) -> None:
    """Until count() reaches target; raises when the count has not moved for `stall` seconds (a
    worker that fails, e.g. on a schema it does not match, must not hang the bench)."""
    last, changed = -1, time.monotonic()
    while True:
        current = count()
        if current >= target:
            return
        if current != last:
            last, changed = current, time.monotonic()
        elif time.monotonic() - changed > stall:
            raise TimeoutError(f"no progress for {stall:.0f}s waiting for {what} ({current}/{target})")
        time.sleep(interval)
