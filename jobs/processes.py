"""Child processes of the quick start (and of tests and benchmarks that need real ones): start a
`manage.py` command or daphne with the same database, wait until it answers, stop it gracefully."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import httpx2

BASE_DIR = Path(__file__).resolve().parent.parent
STOP_GRACE = 10.0  # seconds a child has to exit after SIGTERM before it is killed


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """A DATABASE_URL naming the database of `settings_dict` (e.g. connection.settings_dict), so
    a child process uses the same database as its parent (a test database included)."""
    engine, name = settings_dict["ENGINE"], str(settings_dict["NAME"])
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(name).resolve()}"
    if engine.endswith(("postgresql", "postgis")):
        user = urllib.parse.quote(settings_dict.get("USER") or "", safe="")
        password = urllib.parse.quote(settings_dict.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = settings_dict.get("HOST") or "localhost"
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{urllib.parse.quote(name, safe='')}"
    raise ValueError(f"cannot hand a {engine} database to a child process")


class Child:
    """One child process; its output goes to `log` (a path), read back when it fails to start."""

    def __init__(self, name: str, argv: list[str], *, env: Mapping[str, str], log: Path) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file: IO[bytes] = log.open("wb")
        # A session of its own: a Ctrl-C in the terminal reaches the parent, which stops the
        # children in order, rather than every process at once.
        self.process = subprocess.Popen(
            argv, cwd=BASE_DIR, env=dict(env), stdout=self._log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    @classmethod
    def manage(cls, name: str, *args: str, env: Mapping[str, str], log: Path) -> Child:
        return cls(name, [sys.executable, str(BASE_DIR / "manage.py"), *args], env=env, log=log)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def output(self, tail: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.process.pid, sig)

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds. Returns the exit code."""
        if self.running():
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()
        return self.process.returncode

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.process.wait()
        self._log_file.close()


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, child: Child | None = None) -> None:
    """Poll `check` until it is true; TimeoutError after `timeout` seconds (or when `child` died)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while not check():
        if child is not None and not child.running():
            raise RuntimeError(f"{child.name} exited ({child.process.returncode}):\n{child.output()}")
        if time.monotonic() > deadline:
            detail = f":\n{child.output()}" if child is not None else ""
            raise TimeoutError(f"{what} not ready after {timeout:g}s{detail}")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def answers(url: str) -> Callable[[], bool]:
    """A check for wait_until: `url` answers an HTTP GET with any status below 500."""

    def check() -> bool:
        try:
            return httpx2.get(url, timeout=2.0).status_code < 500
        except httpx2.HTTPError:
            return False

    return check


def start_demo_services(
    env: Mapping[str, str], log: Path, *, timeout: float = 60
) -> tuple[Child, dict[str, str]]:
    """`manage.py demoservices --port 0` started and listening (stopped again if it never says
    so): the child, and the settings that point the example's model, CRM and CMS at it."""
    demo = Child.manage("demo", "demoservices", "--port", "0", env=env, log=log)
    try:
        wait_until(lambda: "listening on" in demo.output(), timeout=timeout, what="demo services", child=demo)
        found = re.search(r"listening on (http://\S+)", demo.output())
        assert found is not None
    except BaseException:
        demo.stop()
        raise
    url = found.group(1)
    services = {
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": "bench",
        "CRM_API_URL": f"{url}/crm",
        "CMS_API_URL": f"{url}/cms",
    }
    return demo, services
