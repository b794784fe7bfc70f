"""Network namespaces as the bed's "hosts", and the network faults done to them.

Each host is a namespace `wfmh-<session>-<name>` joined to this machine's own namespace by a veth
pair addressed from 198.18.0.0/15 only (RFC 2544's benchmarking range): a /30 per host, the host
side `.1` (where PostgreSQL and the delaying proxy listen), the namespace side `.2`. A namespace
gets no default route and an iptables guard, so a process in it reaches its own loopback and
198.18.0.0/15 (in practice its own /30), nothing else.
Faults: a blackhole (iptables DROP inside the namespace, both ways), and the host-side link down.
Everything is removed by `Network.destroy()`, and by an atexit hook for a session cut short.
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "wfmh"
BENCH_NET = ipaddress.ip_network("198.18.0.0/15")


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (ip, iptables) and fail loudly with what it said."""
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def faketime_library() -> str | None:
    """Debian's libfaketime.so.1, where `dpkg -L libfaketime` says it is (None when missing)."""
    paths: list[str] = []
    if shutil.which("dpkg"):
        listed = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True)
        paths = [line for line in listed.stdout.splitlines() if line.endswith("/libfaketime.so.1")]
    paths.append("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
    return next((p for p in paths if Path(p).is_file()), None)


def missing() -> str | None:
    """Why the bed cannot be built here (None: it can): root, ip netns, iptables, libfaketime."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, iptables)"
    for tool in ("ip", "iptables", "unshare", "hostname"):
        if not shutil.which(tool):
            return f"needs `{tool}` (apt-get install iproute2 iptables util-linux hostname)"
    if faketime_library() is None:
        return "needs libfaketime (apt-get install faketime)"
    probe = f"{PREFIX}-probe-{secrets.token_hex(2)}"
    if sh("ip", "netns", "add", probe, check=False).returncode != 0:
        return "`ip netns add` is not permitted here"
    try:
        if sh("ip", "netns", "exec", probe, "iptables", "-S", check=False).returncode != 0:
            return "iptables does not work inside a network namespace here"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One namespace: `addr` is its own address, `gateway` the machine's end of its link."""

    name: str
    netns: str
    link: str  # the host-side veth (its peer is `eth0` inside the namespace)
    gateway: str
    addr: str
    faults: list[str] = field(default_factory=list)

    def exec_prefix(self) -> list[str]:
        """Run a command in the namespace, with its own host name (a UTS namespace): the engine
        sees each runner on its own host, so no same-host takeover blurs a fault's effect.
        `unshare` and `sh` exec in place, so the pid is the command's own."""
        return [
            "ip", "netns", "exec", self.netns, "unshare", "--uts", "--", "sh", "-c",
            'hostname "$0" && exec "$@"', self.netns,
        ]  # fmt: skip

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.netns, "iptables", *args, check=check)

    def guard(self) -> None:
        """Inside the namespace, refuse any destination but loopback and 198.18.0.0/15 (there is
        no default route either: this makes a mistake loud instead of silent)."""
        self.iptables("-A", "OUTPUT", "-d", "127.0.0.0/8", "-j", "ACCEPT")
        self.iptables("-A", "OUTPUT", "-d", str(BENCH_NET), "-j", "ACCEPT")
        self.iptables("-A", "OUTPUT", "-j", "REJECT")

    def _drops(self) -> list[tuple[str, str]]:
        return [("OUTPUT", "-d"), ("INPUT", "-s")]

    def blackhole(self) -> None:
        """Drop every packet between this namespace and the machine's end of its link (rules
        put first, before the guard's)."""
        for chain, way in self._drops():
            self.iptables("-I", chain, "1", way, self.gateway, "-j", "DROP")
        self.faults.append("blackhole")

    def link_down(self) -> None:
        sh("ip", "link", "set", self.link, "down")
        self.faults.append("link down")

    def heal(self) -> None:
        """Undo every fault (idempotent): delete the blackhole's rules, bring the link up."""
        for chain, way in self._drops():
            while self.iptables("-D", chain, way, self.gateway, "-j", "DROP", check=False).returncode == 0:
                pass
        sh("ip", "link", "set", self.link, "up", check=False)
        self.faults.clear()

    def pids(self) -> list[int]:
        done = sh("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in done.stdout.split()]


class Network:
    """The session's namespaces. `add(name)` makes one; `destroy()` removes them all."""

    def __init__(self) -> None:
        self.session = secrets.token_hex(3)
        self.hosts: dict[str, Host] = {}
        atexit.register(cleanup_session, self.session)

    def add(self, name: str) -> Host:
        netns = f"{PREFIX}-{self.session}-{name}"
        link = f"{PREFIX}{self.session}{name}"[:15]
        gateway, addr = _free_slash30()
        sh("ip", "netns", "add", netns)
        host = Host(name=name, netns=netns, link=link, gateway=gateway, addr=addr)
        self.hosts[name] = host
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns)
        sh("ip", "addr", "add", f"{gateway}/30", "dev", link)
        sh("ip", "link", "set", link, "up")
        sh("ip", "-n", netns, "addr", "add", f"{addr}/30", "dev", "eth0")
        sh("ip", "-n", netns, "link", "set", "eth0", "up")
        sh("ip", "-n", netns, "link", "set", "lo", "up")
        host.guard()
        routes = sh("ip", "-n", netns, "route", "show").stdout
        assert "default" not in routes, routes
        return host

    def destroy(self) -> None:
        cleanup_session(self.session)
        self.hosts.clear()


def _free_slash30() -> tuple[str, str]:
    """A /30 of 198.18.0.0/15 that no interface of this machine uses (two sessions may run)."""
    used = sh("ip", "-o", "-4", "addr", "show").stdout
    taken = {ipaddress.ip_address(a) for a in re.findall(r"inet (198\.1[89]\.\d+\.\d+)", used)}
    for _ in range(1000):
        block = random.randrange(1, BENCH_NET.num_addresses // 4 - 1)
        net = ipaddress.ip_network(f"{BENCH_NET.network_address + 4 * block}/30")
        if not any(a in net for a in taken):
            first, second = list(net.hosts())
            return str(first), str(second)
    raise RuntimeError("no free /30 in 198.18.0.0/15")


def cleanup_session(session: str) -> list[str]:
    """Remove what the session `session` left: the processes inside its namespaces (SIGKILL, by
    pid), their links and the namespaces (with their iptables rules). Returns what it removed."""
    removed = []
    names = sh("ip", "netns", "list", check=False).stdout.split("\n")
    for netns in (line.split()[0] for line in names if line.strip()):
        if not netns.startswith(f"{PREFIX}-{session}-"):
            continue
        for pid in (int(p) for p in sh("ip", "netns", "pids", netns, check=False).stdout.split()):
            try:
                os.kill(pid, signal.SIGCONT)  # a stopped process dies on SIGKILL too, but be plain
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        link = f"{PREFIX}{session}{netns.rsplit('-', 1)[1]}"[:15]
        sh("ip", "link", "del", link, check=False)
        sh("ip", "netns", "del", netns, check=False)
        removed.append(netns)
    return removed


def leftovers(session: str) -> list[str]:
    """Namespaces and links of `session` still present (a test of the cleanup itself)."""
    netns = [n for n in sh("ip", "netns", "list").stdout.split() if n.startswith(f"{PREFIX}-{session}-")]
    links = [n for n in re.findall(r"^\d+: ([^:@]+)", sh("ip", "-o", "link").stdout, re.M)
             if n.startswith(f"{PREFIX}{session}")]  # fmt: skip
    return netns + links
