"""One delaying TCP proxy (tests/multihost/proxy.py's DelayProxy) in a process of its own: its
CPU is then read from /proc/<pid>/stat apart from the bench's, and it shares no GIL with the bench.

    python bench/_delay_proxy.py LISTEN_HOST TARGET_PORT DELAY_SECONDS PORT_FILE

It writes the port it listens on to PORT_FILE (whole, by rename) and runs until SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.multihost.proxy import DelayProxy


def main() -> None:
    listen_host, target_port, delay, port_file = sys.argv[1:5]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    proxy = DelayProxy(listen_host, int(target_port), delay=float(delay)).start()
    Path(port_file + ".tmp").write_text(str(proxy.port))
    os.replace(port_file + ".tmp", port_file)
    while not stop.wait(1.0):
        pass
    proxy.stop()


if __name__ == "__main__":
    main()
