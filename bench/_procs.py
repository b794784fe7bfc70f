"""Sections measured against real runner processes: throughput, send -> first step, idle cost."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._common import BENCH_VAR, ROOT, bench_env, progress, stats_ms, wait_until
from ._db import analyze, clone_waiting_run, create_pending_runs, reset_tables

TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 120.0  # seconds: a runner process to import Django and log "started" (busy machine)


class RunnerProcess:
    """One `runworkflows` process (or the counting wrapper around the same command)."""

    def __init__(
        self,
        db: str,
        name: str,
        *,
        concurrency: int = 20,
        counting: bool = False,
        settings: dict[str, Any] | None = None,
        marks_path: Path | None = None,
    ) -> None:
        BENCH_VAR.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = BENCH_VAR / f"{db}-{name}.log"
        self.counts_path = BENCH_VAR / f"{db}-{name}.counts.json"
        self.counts_path.unlink(missing_ok=True)
        env = bench_env(db)
        env["BENCH_COUNTS_PATH"] = str(self.counts_path)
        script = ["bench/_counting_runner.py"] if counting else ["manage.py", "runworkflows"]
        if settings is not None:  # WORKFLOWS keys overridden for this runner only
            env["BENCH_WORKFLOWS"] = json.dumps(settings)
            script = ["bench/_runner_with.py"]
        if marks_path is not None:  # the phases of resuming a run, noted (bench/send_path.py;
            # it takes BENCH_WORKFLOWS too)
            env["BENCH_MARKS_PATH"] = str(marks_path)
            script = ["bench/_marking_runner.py"]
        self._terminated = False
        self._log = open(self.log_path, "w")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, *script, "--concurrency", str(concurrency)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE if counting else subprocess.DEVNULL,
            stderr=self._log,
            text=True,
        )

    def wait_started(self) -> None:
        def started() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"runner {self.name} exited early:\n{self.log_path.read_text()}")
            return " started (concurrency" in self.log_path.read_text()

        wait_until(started, timeout=START_TIMEOUT, what=f"runner {self.name} to start", interval=0.05)

    def status(self, field: str) -> int:
        """A `VmRSS`-style line of /proc/<pid>/status, in kB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def counts(self) -> dict[str, Any]:
        """The counting wrapper's statement counts now (it writes them on SIGUSR1)."""
        before = self.counts_path.stat().st_mtime_ns if self.counts_path.exists() else None
        self.proc.send_signal(signal.SIGUSR1)

        def fresh():
            if not self.counts_path.exists() or self.counts_path.stat().st_mtime_ns == before:
                return None
            return json.loads(self.counts_path.read_text())

        return wait_until(fresh, timeout=10, what=f"counts of {self.name}", interval=0.01)

    def terminate(self) -> None:
        """SIGTERM, once: a second one after the graceful stop would kill the exiting process."""
        if not self._terminated and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self._terminated = True

    def stop(self) -> str:
        """SIGTERM, a graceful exit, and whatever the process printed."""
        self.terminate()
        try:
            out, _err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _err = self.proc.communicate()
        self._log.close()
        if self.proc.returncode != 0:
            raise RuntimeError(
                f"runner {self.name} exited {self.proc.returncode}:\n{self.log_path.read_text()}"
            )
        return out or ""


def _stop_all(runners: list[RunnerProcess]) -> None:
    for r in runners:
        r.terminate()
    for r in runners:
        r.stop()


def _count(**filters: Any) -> int:
    from workflows.models import Run

    return Run.objects.filter(**filters).count()


# --- 4. throughput -------------------------------------------------------------------------------


def throughput(db: str, runs: int, processes: int) -> dict[str, Any]:
    """`runs` runs x 10 trivial steps over `processes` runner processes (concurrency 20 each).
    The processes start (and are idle) before the runs are inserted, so neither start-up nor a
    staggered start counts; steps/s comes from the entries' own timestamps."""

    reset_tables()
    runners = [RunnerProcess(db, f"throughput{processes}-{i}") for i in range(processes)]
    try:
        for r in runners:
            r.wait_started()
        time.sleep(0.5)  # the LISTEN connection / data_version watch is up
        cpu0 = [r.cpu_seconds() for r in runners]
        t0 = time.monotonic()
        create_pending_runs("bench_ten", [[f"tp{processes}-{i}"] for i in range(runs)])
        wait_until(
            lambda: _count(status="completed") == runs,
            timeout=900,
            what=f"{runs} runs to complete",
            interval=0.1,
        )
        wall = time.monotonic() - t0
        cpu = sum(r.cpu_seconds() for r in runners) - sum(cpu0)
    finally:
        _stop_all(runners)
    return throughput_figures(processes, runs, wall, cpu)


_GROUP_COMMIT = re.compile(
    r"group commit: (\d+) step commits written in (\d+) statements \(at most (\d+) in one\)"
)


_CLAIMS = re.compile(r"stopped \((\d+) runs taken in (\d+) claims\)")


def group_commit_figures(runners: list[RunnerProcess]) -> dict[str, int]:
    """What the stopped runners logged of their group commits (zeros: none grouped) and of their
    claims (how many runs in how many claims: a busy runner gathers slots before it claims)."""
    commits = statements = largest = claims = claimed = 0
    for runner in runners:
        log = runner.log_path.read_text()
        for match in _GROUP_COMMIT.finditer(log):
            commits += int(match[1])
            statements += int(match[2])
            largest = max(largest, int(match[3]))
        for match in _CLAIMS.finditer(log):
            claimed += int(match[1])
            claims += int(match[2])
    return {
        "commits": commits,
        "statements": statements,
        "largest": largest,
        "claims": claims,
        "claimed": claimed,
    }


def throughput_figures(
    processes: int, runs: int, wall: float, cpu: float, key_prefix: str | None = None
) -> dict[str, Any]:
    """Steps/s of the drained runs from the step entries' own timestamps (first start to last
    finish), with the wall time and the runners' CPU per step; `key_prefix`: only the runs whose
    key text starts with it (a later drain of the same database)."""
    from django.db.models import Count, Max, Min

    from workflows.models import Entry

    entries = Entry.objects.filter(kind="step")
    if key_prefix is not None:
        entries = entries.filter(run__key_text__startswith=key_prefix)
    agg = entries.aggregate(first=Min("started_at"), last=Max("finished_at"), n=Count("id"))
    span = (agg["last"] - agg["first"]).total_seconds()
    return {
        "processes": processes,
        "concurrency": 20,
        "runs": runs,
        "steps": agg["n"],
        "steps_per_s": agg["n"] / span,
        "span_s": span,
        "wall_s": wall,
        "runner_cpu_ms_per_step": cpu * 1000 / agg["n"],
    }


# --- 5. send -> first step -----------------------------------------------------------------------


def send_latency(db: str, runs: int) -> dict[str, Any]:
    from workflows import conf
    from workflows.models import Entry

    reset_tables()
    ids = create_pending_runs("bench_waiter", [[f"send-{i}"] for i in range(runs)])
    runner = RunnerProcess(db, "send")
    try:
        runner.wait_started()
        wait_until(lambda: _count(status="waiting") == runs, timeout=120, what="the runs to wait on 'start'")
        time.sleep(0.5)
        client = conf.registry().client("bench_waiter")
        jitter = random.Random(2)
        latencies = []
        for run_id in ids:
            handle = client.get_by_id(run_id)
            first = Entry.objects.filter(run_id=run_id, name="first").values_list("output", flat=True)
            t0 = time.time()
            handle.send("start", {})
            started = wait_until(first.first, timeout=60, what="the first step", interval=0.002)
            latencies.append(started - t0)
            wait_until(
                lambda rid=run_id: _count(id=rid, status="completed"),
                timeout=60,
                what="the run",
                interval=0.005,
            )
            # Idle again before the next send, after a random pause: a fixed one would keep every send
            # at the same phase of SQLite's 50 ms change poll and bias the figure.
            time.sleep(jitter.uniform(0.05, 0.15))
    finally:
        runner.stop()
    return stats_ms(latencies)


# --- 6. idle cost --------------------------------------------------------------------------------


def _make_waiting_template() -> str:
    """One run suspended at its first queue wait by the engine itself (in-process)."""
    from workflows import conf
    from workflows.models import Run
    from workflows.testing import run_until_idle

    (run_id,) = create_pending_runs("bench_waiter", [["idle-template"]])
    run_until_idle(conf.registry())
    status = Run.objects.get(id=run_id).status
    if status != "waiting":
        raise RuntimeError(f"template run is {status}, not waiting")
    return run_id


def idle(db: str, waiting: int, window: float, fill: str) -> dict[str, Any]:
    """A runner with `waiting` runs waiting on a queue: its RSS and statements per second.

    fill="clone": copies of a run the engine suspended are inserted before the runner starts.
    fill="runner": the runs are inserted pending and the measured runner suspends them itself,
    so anything it keeps per run it has handled shows in its memory."""
    reset_tables()
    if fill == "clone":
        template = _make_waiting_template()
        clone_waiting_run(template, [[f"idle-{i}"] for i in range(waiting - 1)])
    else:
        create_pending_runs("bench_waiter", [[f"idle-{i}"] for i in range(waiting)])
    analyze()
    runner = RunnerProcess(db, f"idle{waiting}", counting=True)
    try:
        runner.wait_started()
        t_fill = time.monotonic()
        wait_until(
            lambda: _count(status="waiting") == waiting,
            timeout=900,
            what=f"{waiting} waiting runs",
            interval=0.2,
        )
        fill_s = time.monotonic() - t_fill
        # Settled: no table query for a whole second.
        previous = runner.counts()
        for _ in range(30):
            time.sleep(1.0)
            current = runner.counts()
            if current["counts"].get("table", 0) == previous["counts"].get("table", 0):
                break
            previous = current
        start, rss_start = runner.counts(), runner.status("VmRSS")
        time.sleep(window)
        end, rss_end = runner.counts(), runner.status("VmRSS")
        hwm = runner.status("VmHWM")
    finally:
        final = runner.stop()
    elapsed = end["at"] - start["at"]
    kinds = set(start["counts"]) | set(end["counts"])
    per_s = {k: (end["counts"].get(k, 0) - start["counts"].get(k, 0)) / elapsed for k in kinds}
    totals = {}
    for line in final.splitlines():
        if line.startswith("BENCH_COUNTS "):
            totals = json.loads(line.removeprefix("BENCH_COUNTS "))["counts"]
    return {
        "waiting": waiting,
        "fill": fill,
        "fill_s": fill_s if fill == "runner" else None,
        "rss_mb": rss_end / 1024,
        "rss_start_mb": rss_start / 1024,
        "hwm_mb": hwm / 1024,
        "window_s": elapsed,
        "table_qps": per_s.get("table", 0.0),
        "data_version_qps": per_s.get("data_version", 0.0),
        "listen_qps": per_s.get("listen", 0.0),
        "statements_total": totals,
    }


def measure(db: str, sizes: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {"throughput": {}, "idle": {}}
    for processes in (1, 2):
        progress(
            f"{db}: 4/6 throughput, {sizes['throughput']} runs x 10 steps, {processes} runner process(es)"
        )
        figures["throughput"][str(processes)] = throughput(db, sizes["throughput"], processes)
    progress(f"{db}: 5/6 send -> first step ({sizes['send']} runs, one at a time)")
    figures["send"] = send_latency(db, sizes["send"])
    for label, waiting in (("few", sizes["idle"][0]), ("many", sizes["idle"][1])):
        progress(
            f"{db}: 6/6 idle runner, {waiting} runs waiting ({sizes['idle_fill']} fill, {sizes['window']:g}s)"
        )
        figures["idle"][label] = idle(db, waiting, sizes["window"], sizes["idle_fill"])
    reset_tables()
    return figures
