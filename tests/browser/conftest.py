"""Real processes for the browser tests: daphne serving the project and a `runworkflows` runner,
both on the test database, and headless Debian Chromium driven by Playwright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from django.contrib.auth.models import User
from django.db import connections

from tests.support import free_port, test_database_url, wait_for

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "correct horse battery staple"


class Processes:
    def __init__(self, flag_dir: Path) -> None:
        self.flag_dir = flag_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": test_database_url(),
            "WORKFLOWS_REGISTRIES": "tests.browser.flows.registry",
            "BROWSER_FLAG_DIR": str(self.flag_dir),
            "WORKFLOWS_LEASE_SECONDS": "5",
            "WORKFLOWS_HEARTBEAT_SECONDS": "1",
            "LOG_LEVEL": "WARNING",
        }
        # Without REDIS_URL each process has its own in-memory layer and daphne's consumers read
        # the database on a short interval; with it, the runner's pokes reach them through Redis.
        return env

    def start(self, name: str, *args: str) -> subprocess.Popen:
        with open(self.flag_dir / f"{name}.log", "w") as log:  # the child keeps its own copy
            proc = subprocess.Popen(args, cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, proc))
        return proc

    def daphne(self, port: int | None = None) -> str:
        """Start daphne (on `port`, or a free one) and wait until it serves; returns its base URL."""
        port = port or free_port()
        proc = self.start(
            "daphne",
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        )
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"daphne exited with {proc.returncode}:\n{self.logs()}")
            try:
                return httpx2.get(f"{base}/admin/login/", timeout=1).status_code == 200
            except httpx2.HTTPError:
                return False

        wait_for(up, 120, "daphne to serve")
        return base

    def runner(self) -> subprocess.Popen:
        return self.start("runner", sys.executable, "manage.py", "runworkflows", "--concurrency", "4")

    def stop_all(self) -> None:
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _name, proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def logs(self) -> str:
        return "\n".join(
            f"--- {n}\n{(self.flag_dir / f'{n}.log').read_text()[-3000:]}" for n, _ in self.procs
        )


@pytest.fixture
def processes(transactional_db, tmp_path):
    group = Processes(tmp_path)
    yield group
    group.stop_all()
    print(group.logs())  # shown by pytest when the test failed


@pytest.fixture
def server(processes) -> str:
    return processes.daphne()


@pytest.fixture
def operator(transactional_db) -> User:
    return User.objects.create_superuser("operator", "ops@example.com", PASSWORD)


@pytest.fixture
def chromium(transactional_db, monkeypatch):
    """Playwright's sync API keeps an event loop on this thread; Django must be told the test's
    own ORM calls are still synchronous (Playwright's documented setting for Django)."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()
        # The test's ORM calls ran in Playwright's context, on a connection of their own: close it,
        # or PostgreSQL refuses to drop the test database at the end of the session.
        connections.close_all()


@pytest.fixture
def page(server, operator, chromium):
    """A logged-in operator's page."""
    context = chromium.new_context(viewport={"width": 1440, "height": 1000}, base_url=server)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    yield page
    context.close()
