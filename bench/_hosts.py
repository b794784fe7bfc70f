"""The many-hosts bench's machinery: runner "hosts" (network namespaces of the multi-host test bed,
tests/multihost/netns.py), a delaying proxy process per host (tests/multihost/proxy.py), a private
PostgreSQL cluster at PostgreSQL's default durability, and the CPU of process trees from /proc.

Why apart from bench/multihost.py: all of this must go again whatever happens (`Fleet.destroy`),
and the measuring reads better without it.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import pgcluster
from tests.multihost.netns import PREFIX, Host, Network, sh

from ._common import ROOT, wait_until
from ._machine import processes, tree_cpu

REGISTRY = "bench._multihost_flows.registry"
WORKFLOW = "bench_steps"
START_TIMEOUT = 120.0  # seconds for every runner of a configuration to be up (2 busy cores)
# Never inherited by a runner: they would point it at an address outside its namespace's reach,
# or change the engine's settings from one run of the bench to the next.
DROPPED = ("REDIS_URL", "WORKFLOWS_METRICS_PORT", "PROMETHEUS_MULTIPROC_DIR", "DATABASE_URL")


def why_not() -> str | None:
    """Why the bench cannot run here (None: it can). No iptables or libfaketime needed."""
    if os.geteuid() != 0:
        return "needs root (it creates network namespaces)"
    for tool in ("ip", "unshare", "hostname"):
        if not shutil.which(tool):
            return f"needs `{tool}` (apt-get install iproute2 util-linux hostname)"
    if not pgcluster.available():
        return "needs PostgreSQL's initdb and a `postgres` user for its private cluster"
    probe = f"{PREFIX}-probe-{secrets.token_hex(2)}"
    if sh("ip", "netns", "add", probe, check=False).returncode != 0:
        return "`ip netns add` is missing or not permitted here"
    sh("ip", "netns", "del", probe, check=False)
    return None


class BenchCluster(pgcluster.PrivateCluster):
    """PrivateCluster at PostgreSQL's defaults (fsync, synchronous_commit, full_page_writes on):
    the test bed turns them off, which would flatter every commit and the database's CPU."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options, durable=True)

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])


# --- processes -------------------------------------------------------------------------------------


def _end_all(popens: list[subprocess.Popen[Any]], timeout: float = 60.0) -> None:
    """SIGTERM to each, once (a runner stops gracefully; a second one would cut that short), then
    SIGKILL to any that lingers: by pid only."""
    for popen in popens:
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
    for popen in popens:
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(10)


@dataclass
class Proc:
    """A runner (in its namespace) or a proxy (on the machine's side of the link), each in a
    session of its own: Ctrl-C reaches the bench alone, which ends them in order (runners first)."""

    host: Host
    popen: subprocess.Popen[Any]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.log.name} exited {self.popen.returncode}:\n{tail}")


class Fleet:
    """Namespaces h1..hN and the private cluster (listening on 127.0.0.1 and on each namespace's
    gateway, as the test bed's); `start(n, rtt_ms)` puts a runner on each of the first n hosts,
    behind a proxy of its own when rtt_ms > 0; `end_processes()`, then `destroy()` removes all."""

    def __init__(self, hosts: int, workdir: Path) -> None:
        self.workdir = workdir
        self.network = Network()  # its atexit hook removes the namespaces if we are cut short
        self.cluster: BenchCluster | None = None
        self.runners: list[Proc] = []
        self.proxies: list[Proc] = []
        try:
            self.hosts = [self.network.add(f"h{i + 1}") for i in range(hosts)]
            self.cluster = BenchCluster(max_connections=120, listen=[h.gateway for h in self.hosts])
            atexit.register(self.cluster.destroy)
            self.cluster.start()
        except BaseException:
            self.destroy()
            raise

    def runner_env(self, address: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("WORKFLOWS_")}
        env.update(
            {
                "DATABASE_URL": f"postgres://{pgcluster.PG_USER}@{address}/app",
                "WORKFLOWS_REGISTRIES": REGISTRY,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def _proxy(self, host: Host, delay: float) -> str:
        """A delaying proxy on `host`'s gateway address; returns the address runners use."""
        assert self.cluster is not None
        port_file = self.workdir / f"proxy-{host.name}.port"
        port_file.unlink(missing_ok=True)
        log = self.workdir / f"proxy-{host.name}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "bench/_delay_proxy.py", host.gateway, str(self.cluster.port), str(delay),
                 str(port_file)],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        proxy = Proc(host, popen, log)
        self.proxies.append(proxy)

        def port() -> str | None:
            proxy.check_alive()
            return port_file.read_text() if port_file.exists() else None

        return f"{host.gateway}:{wait_until(port, timeout=30, what=f'the proxy of {host.name}')}"

    def start(self, n: int, rtt_ms: float, concurrency: int) -> list[Proc]:
        """A `runworkflows --concurrency N` on each of the first n hosts, through its own proxy
        delaying each way by rtt_ms / 2 when rtt_ms > 0, else straight to the cluster."""
        assert self.cluster is not None
        for host in self.hosts[:n]:
            address = self._proxy(host, rtt_ms / 2000) if rtt_ms else f"{host.gateway}:{self.cluster.port}"
            log = self.workdir / f"runner-{n}hosts-rtt{rtt_ms:g}-{host.name}.log"
            argv = [sys.executable, "manage.py", "runworkflows", "--concurrency", str(concurrency)]
            with open(log, "wb") as out:
                popen = subprocess.Popen(
                    [*host.exec_prefix(), *argv], cwd=ROOT, env=self.runner_env(address), stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            self.runners.append(Proc(host, popen, log))
        return self.runners

    def wait_ready(self) -> None:
        """Every runner registered (its presence row, by pid) and LISTENing, so that the release's
        NOTIFY reaches them all."""
        assert self.cluster is not None
        pids = [r.pid for r in self.runners]

        def ready() -> bool:
            for runner in self.runners + self.proxies:
                runner.check_alive()
            [(registered, listening)] = self.cluster.query(  # type: ignore[union-attr]
                "SELECT (SELECT count(*) FROM workflows_runnerpresence WHERE pid = ANY(%s)),"
                " (SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%')",
                (pids,),
            )
            return registered == len(pids) and listening >= len(pids)

        wait_until(
            ready, timeout=START_TIMEOUT, what=f"{len(pids)} runner(s) to register and listen", interval=0.1
        )

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: runners, the database (postmaster and children), proxies."""
        assert self.cluster is not None
        table = processes()
        return {
            "runners": tree_cpu((r.pid for r in self.runners), table),
            "database": tree_cpu([self.cluster.postmaster_pid()], table),
            "proxies": tree_cpu((p.pid for p in self.proxies), table),
        }

    def end_processes(self) -> None:
        _end_all([p.popen for p in self.runners])  # first: their graceful stop goes through the proxies
        _end_all([p.popen for p in self.proxies])
        self.runners, self.proxies = [], []

    def destroy(self) -> None:
        """Everything made goes: processes by pid, the cluster and its folder, the namespaces."""
        try:
            self.end_processes()
        finally:
            if self.cluster is not None:
                self.cluster.destroy()
            self.network.destroy()
