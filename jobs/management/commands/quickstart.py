"""`python manage.py quickstart`: the whole app on one machine with the offline demo services.

Migrates, starts the demo services, one runner and daphne as child processes (logs under
var/quickstart/), submits the sample transcript over HTTP, follows the job to `published`, prints
where to look, and serves until Ctrl-C (or exits after the job with --exit-after-job).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from jobs.follow import describe, follow
from jobs.processes import BASE_DIR, Child, answers, database_url, wait_until
from jobs.samples import SAMPLE_PATH
from jobs.submission import jobs_client
from workflows.core.records import RunStatus

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

    def handle(self, *args, host, port, demo_port, exit_after_job, log_dir, job_timeout, **options):
        self.log_dir = log_dir
        port = port or settings.PORT
        web, demo = f"http://{host}:{port}", f"http://127.0.0.1:{demo_port}"
        logging.getLogger("httpx").setLevel(logging.WARNING)  # our own readiness polls are noise
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C while starting: stop cleanly
        for what, (h, p) in {"web server": (host, port), "demo services": ("127.0.0.1", demo_port)}.items():
            if not port_free(h, p):
                raise CommandError(
                    f"port {p} is in use: pass another --{'port' if what == 'web server' else 'demo-port'}"
                )
        self.stdout.write("migrating the database …")
        call_command("migrate", interactive=False, verbosity=0)
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
            children.append(self._start_demo(demo_port, demo, env))
            runner = Child.manage("runner", "runworkflows", env=env, log=self.log_dir / "runner.log")
            children.append(runner)
            children.append(self._start_web(host, port, web, env))
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
        response = httpx.post(f"{web}/jobs", json=body, timeout=30.0)
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
