"""A statement sent into a network cut fails within DATABASE_TCP_USER_TIMEOUT (the bed's: its
lease, 2 s) on a connection made from the project's settings, in a process on h1, so the engine
reconnects once the network heals. Without it (`DATABASE_TCP_USER_TIMEOUT=0`) the statement waits
out TCP's doubling retransmissions (the kernel gives up after about 15 minutes), the healed
process hears back only at the next one, and this test fails at its deadline."""

from __future__ import annotations

import sys

from tests.support import wait_for

from .bed import REGISTRY, TCP_USER_TIMEOUT

SCRIPT = """
import os, sys, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT 1")
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
began = time.monotonic()
try:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    print("answered", flush=True)
except Exception as exc:
    print(f"failed after {time.monotonic() - began:.2f} s: {type(exc).__name__}", flush=True)
"""


def test_a_statement_sent_into_a_cut_fails_within_the_tcp_user_timeout(bed):
    host = bed.hosts["h1"]
    go = bed.workdir / "go"
    probe = bed._spawn(host, [sys.executable, "-c", SCRIPT, str(go)], bed._env(REGISTRY, host), 0, "probe")
    wait_for(lambda: "ready" in probe.output() or not probe.alive(), 60, "the probe to connect")
    assert "ready" in probe.output(), probe.output()[-3000:]
    host.blackhole()
    try:
        go.touch()
        wait_for(
            lambda: not probe.alive(), 4 * TCP_USER_TIMEOUT + 10, "the statement sent into the cut to end"
        )
    finally:
        host.heal()
    last = probe.output().strip().splitlines()[-1]
    assert last.startswith("failed after "), probe.output()[-3000:]
    waited = float(last.split()[2])
    assert waited < 3 * TCP_USER_TIMEOUT, last
    assert "OperationalError" in last
