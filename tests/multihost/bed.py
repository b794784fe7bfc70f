"""The multi-host bed: a private PostgreSQL cluster listening on the namespaces' links, runner and
web processes started inside the namespaces, the ledger, and the database reads the checks use.

One bed per test session (namespaces, cluster, migrations and the control process cost seconds);
`reset()` gives each test a clean slate: faults healed, the engine's tables emptied, a new ledger.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tests import pgcluster
from tests.support import wait_for, wait_serving

from .control import Control
from .ledger import Fault, Ledger
from .netns import Host, Network, faketime_library
from .proxy import DelayProxy

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("h1", "h2", "h3")
LEASE = 2.0
HEARTBEAT = 0.5
WEB_PORT = 8000
REGISTRY = "tests.multihost.flows.registry"
CRON_REGISTRY = "tests.multihost.flows.cron_registry"
# Seconds a runner's connection may leave data unacknowledged before the kernel drops it
# (DATABASE_TCP_USER_TIMEOUT; 10 in production against a 30 s lease): scaled to the bed's lease.
TCP_USER_TIMEOUT = LEASE
# The engine's protection switches, passed from the test's environment to every runner
# (`WORKFLOWS_CLOCK=local WORKFLOWS_STALL_CHECK=0 DATABASE_TCP_USER_TIMEOUT=0 pytest
# tests/multihost` shows the tests fail).
ENGINE_SWITCHES = ("WORKFLOWS_CLOCK", "WORKFLOWS_STALL_CHECK", "DATABASE_TCP_USER_TIMEOUT")
# Never inherited: they would point a process in a namespace at an address it must not reach.
DROPPED = ("REDIS_URL", "WORKFLOWS_METRICS_PORT", "PROMETHEUS_MULTIPROC_DIR", "DATABASE_URL")


@dataclass
class Proc:
    """A process started in a namespace; its output goes to a file (a pipe could fill and block it)."""

    host: Host
    popen: subprocess.Popen[bytes]
    log: Path
    skew: int = 0

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def state(self) -> str:
        """The kernel's state letter (T: stopped), "" when gone."""
        try:
            text = Path(f"/proc/{self.pid}/stat").read_text()
        except FileNotFoundError:
            return ""
        return text[text.rindex(")") + 2]

    def end(self) -> None:
        """SIGTERM (after SIGCONT, were it stopped), then SIGKILL if it lingers: by pid only."""
        if not self.alive():
            return
        for sig in (signal.SIGCONT, signal.SIGTERM):
            self.popen.send_signal(sig)
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)


class Bed:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.network = Network()
        self.procs: list[Proc] = []
        self.proxies: list[DelayProxy] = []
        self.faults: list[Fault] = []
        self.cluster: pgcluster.PrivateCluster | None = None
        self.control: Control | None = None
        self.workdir = root
        self.wall_minus_mono = time.time() - time.monotonic()
        try:
            self.hosts = {name: self.network.add(name) for name in (*HOSTS, "web")}
            gateways = [h.gateway for h in self.hosts.values()]
            self.cluster = pgcluster.PrivateCluster(max_connections=120, listen=gateways).start()
            self._manage("migrate", "--verbosity", "0")
            self.control = Control(self._env(REGISTRY), root / "control.log")
            self.tables = [
                name for (name,) in self.cluster.query(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'workflows%%'"
                )
            ]  # fmt: skip
        except BaseException:
            self.destroy()
            raise

    # --- per test ---------------------------------------------------------------------------------

    def reset(self, workdir: Path) -> None:
        """A clean slate: no process, no fault, empty tables, a new ledger in `workdir`."""
        self.end_processes()
        for host in self.hosts.values():
            host.heal()
        self.faults = []
        self.workdir = workdir
        with self.new_connection() as conn:
            conn.execute(f"TRUNCATE {', '.join(self.tables)} RESTART IDENTITY CASCADE")

    @property
    def ledger_path(self) -> Path:
        return self.workdir / "ledger.log"

    def ledger(self) -> Ledger:
        return Ledger.read(self.ledger_path, self.faults)

    def end_processes(self) -> None:
        for proc in self.procs:
            proc.end()
        self.procs = []
        for proxy in self.proxies:
            proxy.stop()
        self.proxies = []

    def destroy(self) -> None:
        """Everything the bed made goes, whatever state it is in (a finalizer calls it)."""
        self.end_processes()
        if self.control is not None:
            self.control.stop()
        if self.cluster is not None:
            self.cluster.destroy()
        self.network.destroy()

    # --- processes --------------------------------------------------------------------------------

    def _env(self, registry: str, host: Host | None = None, via: str | None = None) -> dict[str, str]:
        """A child's environment. With `host`, a runner's there: the database at its link's
        host-side address (or `via` host:port, the delaying proxy), its ledger name."""
        assert self.cluster is not None
        env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("WORKFLOWS_")}
        env["DATABASE_TCP_USER_TIMEOUT"] = str(TCP_USER_TIMEOUT)
        env.update({k: os.environ[k] for k in ENGINE_SWITCHES if k in os.environ})
        address = via or (f"{host.gateway}:{self.cluster.port}" if host else f"127.0.0.1:{self.cluster.port}")
        env.update(
            {
                "DATABASE_URL": f"postgres://{pgcluster.PG_USER}@{address}/app",
                "DATABASE_POOL_MIN_SIZE": "1",
                "WORKFLOWS_REGISTRIES": registry,
                "WORKFLOWS_LEASE_SECONDS": str(LEASE),
                "WORKFLOWS_HEARTBEAT_SECONDS": str(HEARTBEAT),
                "WFMH_LEDGER": str(self.ledger_path),
                "WFMH_HOST": host.name if host else "control",
                "LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self._env(REGISTRY), capture_output=True,
            text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def _spawn(self, host: Host, argv: list[str], env: dict[str, str], skew: int, tag: str) -> Proc:
        if skew:
            env.update(
                {
                    "LD_PRELOAD": faketime_library() or "",
                    "FAKETIME": f"{skew:+d}s",
                    "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                    "FAKETIME_NO_CACHE": "1",
                }
            )
        log = self.workdir / f"{tag}-{host.name}-{len(self.procs)}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [*host.exec_prefix(), *argv], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        proc = Proc(host=host, popen=popen, log=log, skew=skew)
        self.procs.append(proc)
        return proc

    def runners(self, skews: dict[str, int] | None = None, **options: Any) -> list[Proc]:
        """A runner on each of h1, h2, h3 (with their clock skews), started together."""
        skews = skews or {}
        procs = [self.runner(name, skew=skews.get(name, 0), wait=False, **options) for name in HOSTS]
        for proc in procs:
            wait_for(lambda p=proc: self._registered(p), 60, f"the runner on {proc.host.name} to register")
        return procs

    def runner(
        self,
        name: str,
        *,
        skew: int = 0,
        concurrency: int = 4,
        registry: str = REGISTRY,
        delay: float = 0.0,
        wait: bool = True,
    ) -> Proc:
        """Start `runworkflows` on host `name` with its wall clock `skew` seconds off (libfaketime),
        through a proxy delaying each way by `delay` seconds when given; by default returns once
        it is registered."""
        host = self.hosts[name]
        via = None
        if delay:
            assert self.cluster is not None
            proxy = DelayProxy(host.gateway, self.cluster.port, delay=delay).start()
            self.proxies.append(proxy)
            via = f"{host.gateway}:{proxy.port}"
        argv = [
            sys.executable,
            "manage.py",
            "runworkflows",
            "--concurrency",
            str(concurrency),
            "--db-threads",
            "2",
        ]
        proc = self._spawn(host, argv, self._env(registry, host, via), skew, "runner")
        if wait:
            wait_for(lambda: self._registered(proc), 60, f"the runner on {name} to register")
        return proc

    def _registered(self, proc: Proc) -> bool:
        if not proc.alive():
            raise AssertionError(f"runner on {proc.host.name} exited:\n{proc.output()[-3000:]}")
        return bool(self.query("SELECT 1 FROM workflows_runnerpresence WHERE pid = %s", (proc.pid,)))

    def web(self) -> tuple[Proc, str]:
        """daphne on the web host, bound to its namespace address only; returns its base URL."""
        host = self.hosts["web"]
        env = self._env(REGISTRY, host)
        env.update({"ALLOWED_HOSTS": host.addr, "WFMH_HOST": "web"})
        argv = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            host.addr,
            "-p",
            str(WEB_PORT),
            "config.asgi:application",
        ]
        proc = self._spawn(host, argv, env, 0, "web")
        base = f"http://{host.addr}:{WEB_PORT}"
        wait_serving(f"{base}/api/openapi.json", proc.alive, proc.output, 60, "daphne in the web namespace")
        return proc, base

    def probe_clock(self, name: str, skew: int) -> tuple[float, float]:
        """In host `name` with the runner's faketime settings: (its time.time() minus ours,
        its time.monotonic() minus ours), each read between two of our own readings."""
        code = "import time; print(time.time(), time.monotonic())"
        env = self._env(REGISTRY, self.hosts[name])
        before = time.time(), time.monotonic()
        proc = self._spawn(self.hosts[name], [sys.executable, "-c", code], env, skew, "probe")
        assert proc.popen.wait(30) == 0, proc.output()
        after = time.time(), time.monotonic()
        wall, mono = (float(x) for x in proc.output().split())
        assert before[1] <= mono <= after[1], "monotonic differs in the namespace"
        return wall - (before[0] + after[0]) / 2, mono - (before[1] + after[1]) / 2

    # --- faults -----------------------------------------------------------------------------------

    def fault(self, proc: Proc, kind: str) -> Fault:
        """Put a fault in place on `proc` ("stop", "blackhole", "link", "kill"); the fault's start
        is taken once it surely holds (a stopped process shows state T)."""
        if kind == "stop":
            proc.popen.send_signal(signal.SIGSTOP)
            wait_for(lambda: proc.state() == "T", 5, "the runner to stop")
        elif kind == "kill":
            proc.popen.kill()
            proc.popen.wait(10)
        elif kind == "blackhole":
            proc.host.blackhole()
        elif kind == "link":
            proc.host.link_down()
        fault = Fault(host=proc.host.name, kind=kind, start=time.monotonic(), pid=proc.pid)
        self.faults.append(fault)
        return fault

    def undo(self, proc: Proc, fault: Fault) -> None:
        if fault.kind == "stop":
            proc.popen.send_signal(signal.SIGCONT)
        else:
            proc.host.heal()
        fault.end = time.monotonic()

    # --- the database -----------------------------------------------------------------------------

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        assert self.cluster is not None
        return self.cluster.query(sql, params)

    def start(self, workflow: str, keys: list[list[str]], state: dict[str, Any] | None = None) -> list[str]:
        assert self.control is not None
        return self.control.start(workflow, keys, state)

    def statuses(self, workflow: str | None = None) -> Counter[str]:
        rows = self.query("SELECT workflow, status, count(*) FROM workflows_run GROUP BY workflow, status")
        counts: Counter[str] = Counter()
        for name, status, n in rows:
            if workflow is None or name == workflow:
                counts[status] += n
        return counts

    def all_completed(self, count: int, workflow: str | None = None) -> bool:
        statuses = self.statuses(workflow)
        bad = {s: n for s, n in statuses.items() if s in ("failed", "cancelled")}
        assert not bad, f"runs ended badly: {bad}"
        return statuses["completed"] == count

    def recorded_steps(self) -> dict[str, list[tuple[str, str]]]:
        """Each run's (key joined by "/") step entries in the history: (name, status)."""
        rows = self.query(
            "SELECT r.key, e.name, e.status FROM workflows_entry e JOIN workflows_run r ON r.id = e.run_id"
            " WHERE NOT e.superseded AND e.kind = 'step' ORDER BY r.key, e.position"
        )
        steps: dict[str, list[tuple[str, str]]] = {}
        for key, name, status in rows:
            steps.setdefault("/".join(key), []).append((name, status))
        return steps

    def held_by(self, proc: Proc) -> list[str]:
        """Runs whose lease the runner `proc` holds now."""
        rows = self.query(
            "SELECT r.key FROM workflows_run r JOIN workflows_runnerpresence p ON p.owner = r.lease_owner"
            " WHERE p.pid = %s AND r.status = 'running'",
            (proc.pid,),
        )
        return ["/".join(key) for (key,) in rows]

    def new_connection(self) -> psycopg.Connection[Any]:
        assert self.cluster is not None
        return psycopg.connect(self.cluster.url(), autocommit=True)
