"""`python manage.py quickstart`: the whole app on one machine with the offline demo services.

Migrates, starts the demo services, one runner and daphne as child processes (logs under
var/quickstart/), submits the sample transcript over HTTP, follows the job to `published`, prints
where to look, and serves until Ctrl-C (or exits after the job with --exit-after-job).

Whatever stops it before the job runs (a port in use, models changed without a migration, a
database whose migration history this code does not match, a child that dies at start) ends with
one message naming the exact command to run next, written for the way it was started: `make demo
PORT=… DEMO_PORT=…` (the Makefile passes --via-make) or `python manage.py quickstart --port …`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import socket
import sys
import time
from pathlib import Path

import httpx2
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.exceptions import InconsistentMigrationHistory, NodeNotFoundError
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from jobs.follow import describe, follow
from jobs.processes import BASE_DIR, Child, answers, database_url, wait_until
from jobs.samples import SAMPLE_PATH
from jobs.submission import jobs_client
from workflows import RunStatus

LOG_DIR = BASE_DIR / "var" / "quickstart"
START_TIMEOUT = 60.0  # seconds for a child to answer


class Command(BaseCommand):
    help = "Run web server, runner and offline demo services, and one sample job through to published."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=None, help="Web server port (default $PORT or 8000).")
        parser.add_argument("--demo-port", type=int, default=8001, help="Demo services port (default 8001).")
        parser.add_argument(
            "--exit-after-job", action="store_true", help="Stop everything once the job ends."
        )
        parser.add_argument("--log-dir", type=Path, default=LOG_DIR, help="Where the children's logs go.")
        parser.add_argument("--job-timeout", type=float, default=300.0, help="Seconds to wait for the job.")
        # Set by `make demo`: the commands this suggests are then `make demo PORT=… DEMO_PORT=…`.
        parser.add_argument("--via-make", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, host, port, demo_port, exit_after_job, log_dir, job_timeout, via_make, **options):
        self.log_dir = log_dir
        port = port or settings.PORT
        self.rerun = Rerun(via_make=via_make, port=port, demo_port=demo_port)
        web, demo = f"http://{host}:{port}", f"http://127.0.0.1:{demo_port}"
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # our own readiness polls are noise
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C while starting: stop cleanly
        check_ports(host, port, demo_port, self.rerun)
        self.stdout.write("migrating the database …")
        migrate(self.rerun)
        env = {
            **os.environ,
            "DATABASE_URL": database_url(connection.settings_dict),
            "OPENAI_BASE_URL": f"{demo}/v1",
            "OPENAI_API_KEY": "offline-demo-key",
            "OPENAI_MODEL": "demo",
            "CRM_API_URL": f"{demo}/crm",
            "CMS_API_URL": f"{demo}/cms",
            "PYTHONUNBUFFERED": "1",
        }
        children: list[Child] = []
        try:
            try:
                children.append(self._start_demo(demo_port, demo, env))
                runner = Child.manage("runner", "runworkflows", env=env, log=self.log_dir / "runner.log")
                children.append(runner)
                children.append(self._start_web(host, port, web, env))
            except (RuntimeError, TimeoutError) as exc:  # a child died or never answered
                log = shlex.quote(str(self.log_dir))
                raise CommandError(
                    f"{exc}\nRead its log: tail -n 50 {log}/*.log\nthen start again: {self.rerun.command()}"
                ) from None
            self.stdout.write(f"logs: {self.log_dir}/{{demo,runner,web}}.log")
            run = self._sample_job(web, job_timeout)
            self._print_urls(web, demo)
            if exit_after_job:
                if run.status != RunStatus.COMPLETED:
                    raise CommandError(f"the sample job ended {run.status}: {run.state.get('error')}")
                return
            self.stdout.write("serving; press Ctrl-C to stop")
            self._serve(children)
            self.stdout.write("\nstopping …")
        except KeyboardInterrupt:
            self.stdout.write("\nstopping …")
        finally:
            for child in reversed(children):  # web first, then the runner (gracefully), then the demo
                child.stop()

    def _start_demo(self, demo_port: int, demo: str, env: dict[str, str]) -> Child:
        child = Child.manage(
            "demo", "demoservices", "--port", str(demo_port), env=env, log=self.log_dir / "demo.log"
        )
        wait_until(answers(f"{demo}/"), timeout=START_TIMEOUT, what="demo services", child=child)
        self.stdout.write(f"demo services (offline model, CRM, CMS) on {demo}")
        return child

    def _start_web(self, host: str, port: int, web: str, env: dict[str, str]) -> Child:
        argv = [_python(), "-m", "daphne", "-b", host, "-p", str(port), "config.asgi:application"]
        child = Child("web", argv, env=env, log=self.log_dir / "web.log")
        wait_until(answers(f"{web}/api/openapi.json"), timeout=START_TIMEOUT, what="web server", child=child)
        self.stdout.write(f"web server (daphne) on {web}")
        return child

    def _sample_job(self, web: str, timeout: float):
        body = {"title": "Discovery call: Northwind Logistics", "transcript": SAMPLE_PATH.read_text()}
        response = httpx2.post(f"{web}/jobs", json=body, timeout=30.0)
        if response.status_code != 202:
            raise CommandError(f"POST /jobs answered {response.status_code}: {response.text}")
        job_id = response.json()["jobId"]
        self.stdout.write(f"\nsubmitted the sample job {job_id} (POST {web}/jobs); following it:")
        handle = jobs_client().get([job_id])
        run = follow(handle, self.stdout, timeout=timeout)
        self.stdout.write("\nfinal state:\n" + describe(job_id, run))
        self.stdout.write(f"\nread it again: curl {web}/jobs/{job_id}")
        return run

    def _print_urls(self, web: str, demo: str) -> None:
        self.stdout.write(
            "\n"
            f"  dashboard  {web}/dashboard/\n"
            f"  admin      {web}/admin/   (make a login: python manage.py createsuperuser)\n"
            f"  API docs   {web}/api/docs\n"
            f"  demo CMS   {demo}/cms/posts\n"
        )

    def _serve(self, children: list[Child]) -> None:
        stop = []
        # Ctrl-C or SIGTERM ends the loop; the caller then stops the children in order. (Set here
        # explicitly: a shell starting us in the background makes us inherit an ignored SIGINT.)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.append(True))
        while not stop:
            for child in children:
                if not child.running():
                    raise CommandError(f"{child.name} exited:\n{child.output()}")
            time.sleep(0.5)


class Rerun:
    """The command that starts the quick start again, as the user typed it, with other ports."""

    def __init__(self, *, via_make: bool, port: int, demo_port: int) -> None:
        self.via_make, self.port, self.demo_port = via_make, port, demo_port

    def command(self, port: int | None = None, demo_port: int | None = None) -> str:
        port, demo_port = port or self.port, demo_port or self.demo_port
        if self.via_make:
            return f"make demo PORT={port} DEMO_PORT={demo_port}"
        return f"{_manage()} quickstart --port {port} --demo-port {demo_port}"


def _manage() -> str:
    python = Path(sys.executable)
    try:
        python = python.relative_to(Path.cwd())
    except ValueError:
        pass
    return f"{shlex.quote(str(python))} manage.py"


def check_ports(host: str, port: int, demo_port: int, rerun: Rerun) -> None:
    """CommandError naming free ports to use when the web server's or the demo services' is taken."""
    if port == demo_port:
        raise CommandError(
            f"the web server and the demo services cannot share port {port}: "
            f"{rerun.command(demo_port=free_port_from(demo_port + 1, exclude={port}))}"
        )
    web_free, demo_free = port_free(host, port), port_free("127.0.0.1", demo_port)
    if web_free and demo_free:
        return
    new_port = port if web_free else free_port_from(port + 1, exclude={demo_port}, host=host)
    new_demo = demo_port if demo_free else free_port_from(demo_port + 1, exclude={new_port})
    taken = [
        f"{p} ({what})"
        for p, what, free in ((port, "web server", web_free), (demo_port, "demo services", demo_free))
        if not free
    ]
    raise CommandError(
        f"port {' and '.join(taken)} {'is' if len(taken) == 1 else 'are'} in use (another demo still "
        f"running?). Stop it, or use free ports: {rerun.command(new_port, new_demo)}"
    )


def free_port_from(start: int, *, exclude: set[int], host: str = "127.0.0.1") -> int:
    """The first free port from `start` up (a port the user can read and remember, unlike 0)."""
    for candidate in range(start, min(start + 200, 65536)):
        if candidate not in exclude and port_free(host, candidate):
            return candidate
    raise CommandError(f"no free port between {start} and {start + 199}: pass --port / --demo-port")


def unmade_migrations() -> list[str]:
    """The apps whose models changed with no migration written for the change."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    detector = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps))
    return sorted(detector.changes(graph=loader.graph))


def migrate(rerun: Rerun) -> None:
    """`migrate`, or a CommandError saying what to run when the schema cannot be brought up to date."""
    manage = _manage()
    if missing := unmade_migrations():
        raise CommandError(
            f"the models of {', '.join(missing)} changed with no migration for it. Write it, then start "
            f"again: {manage} makemigrations {' '.join(missing)} && {rerun.command()}"
        )
    try:
        call_command("migrate", interactive=False, verbosity=0)
    except (InconsistentMigrationHistory, NodeNotFoundError) as exc:
        name = connection.settings_dict["NAME"]
        fresh = (
            f"mv {shlex.quote(str(name))} {shlex.quote(str(name))}.old && {rerun.command()}"
            if connection.vendor == "sqlite"
            else f"{manage} showmigrations, then fix the history or point DATABASE_URL at a new database"
        )
        raise CommandError(
            f"the database {name} holds a migration history this code does not match ({exc}). "
            f"Start from a fresh database: {fresh}"
        ) from None
    except DatabaseError as exc:
        raise CommandError(
            f"migrating the database failed: {exc}. Check DATABASE_URL (unset: var/db.sqlite3), "
            f"then: {manage} migrate && {rerun.command()}"
        ) from None


def port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _python() -> str:
    return sys.executable
