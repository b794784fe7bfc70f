"""Same-host takeover: how soon a restarted runner resumes its killed predecessor's run.

One run enters a slow step under a long lease (60 s by default); then, N times: the runner is
killed with SIGKILL mid-step (and reaped, as a supervisor does), a new `runworkflows` is started
at once, and the time from that restart to the step starting again in the new runner is taken
(the step body stamps its own start). Without the takeover each restart would wait out the lease.
Also printed: restart -> the runner's "started" log line (Python, Django and the store's set-up)
and from there to the step (announce, take over, claim, replay). Target: <= 2 s from restart.

    .venv/bin/python bench/takeover.py [--db sqlite|postgres] [--rounds 10] [--lease 60] [--json PATH]

It uses its own database (`var/bench/takeover.sqlite3`, or the PostgreSQL database
`bench_takeover`, created and dropped) and `var/bench/takeover/` for the step's stamps and logs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `workflows` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workflows import setup, workflow

ROOT = Path(__file__).resolve().parents[1]
VAR = Path(os.environ.get("BENCH_VAR") or ROOT / "var" / "bench")
WORK = VAR / "takeover"
SQLITE = VAR / "takeover.sqlite3"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
PG_DB = "bench_takeover"
TARGET = 2.0  # seconds from the restart to the step starting again
START_TIMEOUT = 120.0  # seconds a runner may take to reach its step on a busy machine


# --- the workflow (imported by the runner processes: WORKFLOWS_REGISTRIES=bench.takeover.registry)


def _work() -> Path:
    return Path(os.environ.get("TAKEOVER_DIR", str(WORK)))


async def slow(step):
    """Stamps its start, then blocks until the bench releases it."""
    with open(_work() / "stamps.log", "a") as f:  # noqa: ASYNC230 - one short line, as it happens
        f.write(f"{step.attempt} {time.time():.6f}\n")
    while not (_work() / "release").exists():  # noqa: ASYNC110 - the signal comes from another process
        await asyncio.sleep(0.02)
    return step.attempt


async def takeover_body(ctx):
    return await ctx.step("slow", slow, timeout=3600, max_retries=100_000)


registry = setup(use={"benchTakeover": workflow(takeover_body)})


# --- the bench ------------------------------------------------------------------------------------


def url(db: str) -> str:
    return f"sqlite:///{SQLITE}" if db == "sqlite" else f"{PG_SERVER}/{PG_DB}"


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def prepare(db: str) -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    if db == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(SQLITE) + suffix).unlink(missing_ok=True)
    else:
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
        _pg_admin(f"CREATE DATABASE {PG_DB}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env(db, 60), check=True)


def drop(db: str) -> None:
    if db == "postgres":
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")


def env(db: str, lease: float) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "DATABASE_URL": url(db),
        "WORKFLOWS_REGISTRIES": "bench.takeover.registry",
        "WORKFLOWS_LEASE_SECONDS": str(lease),
        "WORKFLOWS_HEARTBEAT_SECONDS": str(max(1.0, lease / 10)),
        "TAKEOVER_DIR": str(WORK),
        "LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }


def stamps() -> list[float]:
    path = WORK / "stamps.log"
    return [float(line.split()[1]) for line in path.read_text().splitlines()] if path.exists() else []


def wait_until(predicate, what: str, timeout: float = START_TIMEOUT, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Runner:
    def __init__(self, db: str, lease: float, n: int) -> None:
        self.log_path = WORK / f"runner-{n}.log"
        self._log = open(self.log_path, "w")  # closed in close()
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "runworkflows", "--concurrency", "4"],
            cwd=ROOT,
            env=env(db, lease),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def loop_started(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the runner exited early:\n{self.log_path.read_text()}")
        return " started (concurrency" in self.log_path.read_text()

    def cpu_seconds(self) -> float:
        """CPU the process has used so far (user + system): its start-up cost, whatever the load."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._log.close()


def measure(db: str, rounds: int, lease: float) -> dict:
    os.environ.update(env(db, lease))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from workflows.models import Run

    handle = registry.client("benchTakeover").get_or_create(["r"])
    runner = Runner(db, lease, 0)
    wait_until(lambda: len(stamps()) == 1, "the first runner to start the step")
    to_step, to_loop, cpu = [], [], []
    try:
        for n in range(1, rounds + 1):
            runner.proc.send_signal(signal.SIGKILL)
            runner.close()  # reaped, as a supervisor does before it restarts the runner
            seen = len(stamps())
            runner = Runner(db, lease, n)
            loop_at = None
            while True:  # restart -> the runner's loop starts -> the step starts again
                if loop_at is None and runner.loop_started():
                    loop_at = time.time()
                if len(stamps()) > seen:
                    break
                if time.time() - runner.started > START_TIMEOUT:
                    raise TimeoutError(
                        f"round {n}: the step did not start again:\n{runner.log_path.read_text()}"
                    )
                time.sleep(0.005)
            step_at = stamps()[-1]
            cpu.append(runner.cpu_seconds())
            loop_at = loop_at or step_at
            to_step.append(step_at - runner.started)
            to_loop.append(loop_at - runner.started)
            print(
                f"  round {n:2d}: restart -> step {to_step[-1] * 1000:7.0f} ms"
                f"  (-> runner started {to_loop[-1] * 1000:5.0f} ms, then {(step_at - loop_at) * 1000:5.0f} ms;"
                f" the new runner's CPU so far {cpu[-1] * 1000:5.0f} ms)",
                file=sys.stderr,
                flush=True,
            )
        (WORK / "release").touch()
        wait_until(lambda: Run.objects.get(id=handle.run_id).status == "completed", "the run to finish", 60)
        runner.proc.send_signal(signal.SIGTERM)
        runner.proc.wait(60)
    finally:
        runner.close()
    return {
        "db": db,
        "rounds": rounds,
        "lease_s": lease,
        "restart_to_step_s": {"median": statistics.median(to_step), "max": max(to_step)},
        "restart_to_runner_started_s": {"median": statistics.median(to_loop), "max": max(to_loop)},
        "runner_started_to_step_s": {
            "median": statistics.median(s - lp for s, lp in zip(to_step, to_loop, strict=True)),
            "max": max(s - lp for s, lp in zip(to_step, to_loop, strict=True)),
        },
        "runner_cpu_until_step_s": {"median": statistics.median(cpu), "max": max(cpu)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--lease", type=float, default=60.0, help="the lease the runners hold (seconds)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.rounds < 1 or args.lease <= 0:
        parser.error("--rounds must be >= 1 and --lease > 0")
    prepare(args.db)
    try:
        figures = measure(args.db, args.rounds, args.lease)
    finally:
        drop(args.db)
    median, worst = figures["restart_to_step_s"]["median"], figures["restart_to_step_s"]["max"]
    print(f"\n{args.db}: same-host takeover, {args.rounds} SIGKILL + restart rounds, lease {args.lease:g} s")
    for label, key in (
        ("restart -> the step starting again", "restart_to_step_s"),
        ("  restart -> runner started (process, Django)", "restart_to_runner_started_s"),
        ("  runner started -> step (take over, claim, replay)", "runner_started_to_step_s"),
        ("CPU the new runner used until the step started", "runner_cpu_until_step_s"),
    ):
        f = figures[key]
        print(f"  {label:52} median {f['median'] * 1000:6.0f} ms   max {f['max'] * 1000:6.0f} ms")
    verdict = "MET" if median <= TARGET else "NOT MET"
    print(f"  target: restart -> step <= {TARGET:g} s (median): {verdict} (max {worst:.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
