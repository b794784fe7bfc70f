"""The DBOS side of `bench/side_by_side.py`: DBOS Transact (PyPI `dbos`, pinned in
requirements-bench-dbos.txt) measured on its own fresh PostgreSQL database, in child processes
only, so DBOS's process-wide globals never meet Django's.

    python bench/_sbs_dbos.py driver --url URL --sizes JSON --out PATH   # one round, all figures
    python bench/_sbs_dbos.py worker --url URL --queues sbs_tp --executor-id ID  # a queue worker
    python bench/_sbs_dbos.py inprocess --url sqlite:///PATH --n 50 --out PATH  # in-process only

The workflows mirror `bench/flows.py`: `sbs_zero` (no step), `sbs_ten` (10 trivial steps, each a
`@DBOS.step` returning 7) and `sbs_waiter` (`DBOS.recv("start")`, then a step that returns the
wall-clock time it started). Workflows and steps are plain (sync) functions, DBOS's usual form; they
run in DBOS's executor threads.

The driver launches DBOS itself for the in-process figures (`DBOS.start_workflow(...)` then
`handle.get_result()`), listening to no queue, and drives the worker processes through
`DBOSClient` (enqueue, send), the way an application outside the workers would.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa
from dbos import DBOS, DBOSClient

from bench import _machine, _sbs_pg
from bench._common import ROOT, progress, stats_ms

APP = "sbs"
TP_QUEUE = "sbs_tp"
WAIT_QUEUE = "sbs_wait"
TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 120.0


# --- the workflows -------------------------------------------------------------------------------


@DBOS.step(name="sbs_trivial")
def trivial() -> int:
    return 7


@DBOS.step(name="sbs_stamp")
def stamp() -> float:
    """The wall-clock time the step body started (compared with the sender's clock)."""
    return time.time()


@DBOS.workflow(name="sbs_zero")
def zero() -> int:
    return 0


@DBOS.workflow(name="sbs_ten")
def ten() -> int:
    total = 0
    for _ in range(10):
        total += trivial()
    return total


@DBOS.workflow(name="sbs_waiter")
def waiter() -> float:
    DBOS.recv("start", timeout_seconds=600)
    return stamp()


# --- DBOS in this process ------------------------------------------------------------------------


def config(url: str, executor_id: str, pool: int) -> dict[str, Any]:
    return {
        "name": APP,
        "system_database_url": url,
        "sys_db_pool_size": pool,
        "executor_id": executor_id,  # distinct per process: launch recovers its own executor's runs
        "log_level": "WARNING",
    }


def launch(url: str, executor_id: str, *, queues: list[str], pool: int = 10) -> None:
    DBOS(config=config(url, executor_id, pool))  # type: ignore[arg-type]
    DBOS.listen_queues(queues)
    DBOS.launch()


# Statements sent through SQLAlchemy (every DBOS system-database statement but its LISTEN
# connection), split into the threads that run workflows (the caller and `dbos-executor-*`) and
# DBOS's background threads (queue pollers, notifier, scheduler...).
STATEMENTS: Counter[str] = Counter()
COUNTING = threading.Event()


def _count(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
    if COUNTING.is_set():
        name = threading.current_thread().name
        fg = name == "MainThread" or name.startswith("dbos-executor-")
        STATEMENTS["workflow" if fg else "background"] += 1


sa.event.listen(sa.engine.Engine, "before_cursor_execute", _count)


# --- worker processes ----------------------------------------------------------------------------


class Worker:
    """One `python bench/_sbs_dbos.py worker` process: DBOS launched, dequeuing `queues`."""

    def __init__(self, url: str, name: str, queues: list[str], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = log_dir / f"dbos-{name}.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "worker",
                "--url",
                url,
                "--queues",
                ",".join(queues),
                "--executor-id",
                f"sbs-{name}-{os.getpid()}",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )

    def wait_started(self) -> None:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if line.strip() != "READY":
            raise RuntimeError(f"DBOS worker {self.name} did not start:\n{self.log_path.read_text()}")

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _stop_all(workers: list[Worker]) -> None:
    for w in workers:
        w.terminate()
    for w in workers:
        w.stop()


def worker_main(args: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    launch(args.url, args.executor_id, queues=args.queues.split(","), pool=args.pool)
    print("READY", flush=True)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    os._exit(0)  # in-flight workflow threads (a stopped drain) must not hold the exit


# --- the driver: one round -----------------------------------------------------------------------


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"), pool_size=2)


def _scalar(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def _enqueue_bulk(client: DBOSClient, engine: sa.Engine, workflow: str, queue: str, ids: list[str]) -> None:
    """Every run in one transaction (as the project's bench inserts its backlog)."""
    with engine.begin() as conn:
        for wid in ids:
            client.enqueue_in_transaction(
                conn, {"workflow_name": workflow, "queue_name": queue, "workflow_id": wid}
            )


def in_process(n: int, warmup: int = 3) -> dict[str, Any]:
    """0-step and 10-step workflows alternately: `DBOS.start_workflow(wf)` -> `get_result()`."""
    samples: dict[str, list[float]] = {"zero": [], "ten": []}
    for i in range(n + warmup):
        for name, fn in (("zero", zero), ("ten", ten)):
            t0 = time.perf_counter()
            handle = DBOS.start_workflow(fn)
            handle.get_result()
            if i >= warmup:
                samples[name].append(time.perf_counter() - t0)
    return {name: {"to_result": stats_ms(values)} for name, values in samples.items()}


def stats_windows(url: str, n: int, executor: str) -> dict[str, Any]:
    """Statements, transactions, WAL and tuple writes of n 0-step and n 10-step workflows (run as
    in `in_process`). DBOS is launched and destroyed around each batch so its connections close
    and publish their counters; an empty window (launch + destroy, no workflow) is the part of
    each window that is not the batch."""
    out: dict[str, Any] = {"n": n}
    DBOS.destroy()
    before = _sbs_pg.settled_snapshot(url)
    for label, fn in (("empty", None), ("zero", zero), ("ten", ten)):
        STATEMENTS.clear()
        launch(url, f"{executor}-{label}", queues=[])
        COUNTING.set()
        if fn is not None:
            for _ in range(n):
                DBOS.start_workflow(fn).get_result()
        COUNTING.clear()
        DBOS.destroy()
        after = _sbs_pg.settled_snapshot(url)
        window = _sbs_pg.window(url, before, after)
        window["statements"] = STATEMENTS["workflow"]
        window["statements_background"] = STATEMENTS["background"]
        out[label] = window
        before = after
    return out


DONE_SQL = "SELECT count(*) FROM dbos.workflow_status WHERE workflow_uuid LIKE :p AND status = 'SUCCESS'"
STEPS_SQL = (
    "SELECT count(*), min(started_at_epoch_ms), max(completed_at_epoch_ms) FROM dbos.operation_outputs"
    " WHERE workflow_uuid LIKE :p AND function_name = 'sbs_trivial'"
)


def _drain(
    client: DBOSClient,
    engine: sa.Engine,
    workers: list[Worker],
    runs: int,
    prefix: str,
    postmaster: int | None,
) -> dict[str, Any]:
    """`runs` 10-step workflows with ids `prefix-i`, enqueued at once and drained by `workers`:
    steps/s from the steps' own timestamps, the workers' and PostgreSQL's CPU per step. Run twice
    on the same workers, the second time warm (as the project's side, `_sbs_project._drain`)."""
    cpu0, pg0 = sum(w.cpu_seconds() for w in workers), _machine.postgres_cpu_seconds(postmaster)
    t0 = time.monotonic()
    _enqueue_bulk(client, engine, "sbs_ten", TP_QUEUE, [f"{prefix}-{i}" for i in range(runs)])
    ids = f"{prefix}-%"
    _sbs_pg.wait_count(lambda: _scalar(engine, DONE_SQL, p=ids), runs, what=f"{runs} DBOS workflows {ids}")
    wall, cpu = time.monotonic() - t0, sum(w.cpu_seconds() for w in workers) - cpu0
    pg = _machine.postgres_cpu_seconds(postmaster)
    with engine.connect() as conn:
        n_steps, first, last = conn.execute(sa.text(STEPS_SQL), {"p": ids}).one()
    span = (last - first) / 1000
    progress(f"dbos: {n_steps} steps in {span:.1f}s: {n_steps / span:,.0f} steps/s")
    return {
        "runs": runs,
        "steps": n_steps,
        "steps_per_s": n_steps / span,
        "span_s": span,
        "wall_s": wall,
        "worker_cpu_ms_per_step": cpu * 1000 / n_steps,
        "postgres_cpu_ms_per_step": _machine.cpu_ms_per_step(pg0, pg, n_steps),
    }


def throughput_and_busy(
    url: str, client: DBOSClient, engine: sa.Engine, sizes: dict[str, Any], log_dir: Path
) -> dict[str, Any]:
    runs, backlog, submits = sizes["throughput"], sizes["backlog"], sizes["submits"]
    workers = [Worker(url, f"tp{i}", [TP_QUEUE], log_dir) for i in range(2)]
    try:
        for w in workers:
            w.wait_started()
        time.sleep(1.5)  # each worker's queue thread lists the queues once a second
        postmaster = _machine.postmaster_pid(url)
        tp = {"processes": 2, "worker_concurrency": 20, "polling_interval_s": sizes["dbos_poll"]}
        tp.update(_drain(client, engine, workers, runs, "tp", postmaster))
        tp["warm"] = _drain(client, engine, workers, runs, "tw", postmaster)

        # Submitting while both workers are busy with a backlog.
        _enqueue_bulk(client, engine, "sbs_ten", TP_QUEUE, [f"bl-{i}" for i in range(backlog)])
        _sbs_pg.wait_count(
            lambda: _scalar(engine, DONE_SQL, p="bl-%"), 1, what="the backlog to start", interval=0.005
        )
        busy = _sbs_pg.submits_beside_floor(
            url,
            submits,
            lambda i: client.enqueue(
                {"workflow_name": "sbs_ten", "queue_name": TP_QUEUE, "workflow_id": f"sub-{i}"}
            ),
        )
        left = _scalar(
            engine,
            "SELECT count(*) FROM dbos.workflow_status WHERE workflow_uuid LIKE 'bl-%' AND status <> 'SUCCESS'",
        )
    finally:
        _stop_all(workers)
    busy["backlog"] = backlog
    busy["backlog_left_after_last_submit"] = left
    return {"throughput": tp, "submit_busy": busy}


def send_latency(url: str, client: DBOSClient, engine: sa.Engine, n: int, log_dir: Path) -> dict[str, Any]:
    """`DBOSClient.send(id, {}, "start")` to a workflow blocked in `DBOS.recv("start")` in a worker
    process -> the start of the step after it (its own wall-clock stamp), one at a time."""
    worker = Worker(url, "send", [WAIT_QUEUE], log_dir)
    try:
        worker.wait_started()
        ids = [f"w-{i}" for i in range(n)]
        _enqueue_bulk(client, engine, "sbs_waiter", WAIT_QUEUE, ids)
        waiting_sql = (
            "SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid LIKE 'w-%' "
            "AND function_name = 'DBOS.sleep'"
        )
        _sbs_pg.wait_count(lambda: _scalar(engine, waiting_sql), n, what="the waiters to wait in recv")
        time.sleep(0.5)
        jitter = random.Random(2)
        latencies = []
        for wid in ids:
            t0 = time.time()
            client.send(wid, {}, "start")
            started = client.retrieve_workflow(wid).get_result()
            latencies.append(started - t0)
            time.sleep(jitter.uniform(0.05, 0.15))
    finally:
        worker.stop()
    return stats_ms(latencies)


def driver_main(args: argparse.Namespace) -> None:
    sizes = json.loads(args.sizes)
    url = args.url
    log_dir = Path(args.log_dir)
    executor = f"sbs-driver-{os.getpid()}"
    figures: dict[str, Any] = {"dbos_version": _version()}
    launch(url, executor, queues=[])
    DBOS.register_queue(TP_QUEUE, worker_concurrency=20, polling_interval_sec=sizes["dbos_poll"])
    DBOS.register_queue(WAIT_QUEUE, polling_interval_sec=sizes["dbos_poll"])
    _sbs_pg.checkpoint(url)  # after DBOS's own migrations (at launch)
    progress(f"dbos: in-process 0-step and 10-step workflows ({sizes['ten']} each)")
    figures.update(in_process(sizes["ten"]))
    progress(f"dbos: statements, WAL and tuple writes ({sizes['stats']} runs of each)")
    figures["pg"] = stats_windows(url, sizes["stats"], executor)
    client = DBOSClient(system_database_url=url, application_name=APP)
    engine = _engine(url)
    try:
        progress(
            f"dbos: throughput, {sizes['throughput']} x 10 steps, 2 worker processes; then submits "
            f"with a backlog of {sizes['backlog']}"
        )
        figures.update(throughput_and_busy(url, client, engine, sizes, log_dir))
        progress(f"dbos: send -> first step ({sizes['send']} sends)")
        figures["send"] = send_latency(url, client, engine, sizes["send"], log_dir)
    finally:
        client.destroy()
        engine.dispose()
    Path(args.out).write_text(json.dumps(figures, indent=2, default=str))


def inprocess_main(args: argparse.Namespace) -> None:
    """The in-process figures alone, on any system database (`bench/side_by_side_sqlite.py`)."""
    launch(args.url, f"sbs-inprocess-{os.getpid()}", queues=[])
    progress(f"dbos: in-process 0-step and 10-step workflows ({args.n} each)")
    figures: dict[str, Any] = {"dbos_version": _version(), **in_process(args.n)}
    Path(args.out).write_text(json.dumps(figures, indent=2, default=str))


def _version() -> str:
    from importlib.metadata import version

    return version("dbos")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    d = sub.add_parser("driver")
    d.add_argument("--url", required=True)
    d.add_argument("--sizes", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--log-dir", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--queues", required=True)
    w.add_argument("--executor-id", required=True)
    w.add_argument("--pool", type=int, default=10)
    i = sub.add_parser("inprocess")
    i.add_argument("--url", required=True)
    i.add_argument("--n", type=int, required=True)
    i.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.mode == "worker":
        worker_main(args)
    else:
        driver_main(args) if args.mode == "driver" else inprocess_main(args)
        DBOS.destroy()


if __name__ == "__main__":
    main()
