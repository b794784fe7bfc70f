"""The docs' pictures (docs/inspector.md), made from the real app:
`.venv/bin/python docs/screenshots.py [--out docs]`.

On a temporary SQLite database (in a temp dir, removed at the end) it migrates, makes an operator,
and starts the offline demo services, one `runworkflows` and daphne, as `make demo` does. The demo
services are scripted so the pictures show what operators meet: the first model call answers 429
(the extract step retries after its backoff) and the first CMS post answers 400 (publish fails for
good, so the job fails). Then, in headless Chromium (Playwright driving /usr/bin/chromium):

- the failed job's publish step is replayed from the run inspector, as an operator would after the
  fix, and the job runs to `published`;
- a second job runs straight through, and a `reviewedBrief` waits for a decision;
- docs/dashboard.png is the operator dashboard, docs/inspector.png the replayed job's run page.

Nothing is mocked: the jobs go through `POST /jobs`, the runner and the demo services over HTTP.
It takes under a minute (no test runs it: too slow for the suite; it fails loudly when a page changes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jobs.processes import Child, answers, wait_until  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
OPERATOR, PASSWORD = "ops.lead", "screenshots only"
WIDTH = 1280  # the width the pages are made to fit
JOB_TIMEOUT = 120.0  # seconds for a job to get where the pictures need it
SAMPLE = ROOT / "jobs" / "samples" / "discovery-call.txt"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def wait(check: Callable[[], Any], what: str, timeout: float = JOB_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")


class App:
    """The app's processes on a temp database; `stop()` ends them and removes the directory."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.web_port, self.demo_port = free_port(), free_port()
        self.web = f"http://127.0.0.1:{self.web_port}"
        demo = f"http://127.0.0.1:{self.demo_port}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
            "OPENAI_BASE_URL": f"{demo}/v1",
            "OPENAI_API_KEY": "offline-demo-key",
            "OPENAI_MODEL": "demo",
            "CRM_API_URL": f"{demo}/crm",
            "CMS_API_URL": f"{demo}/cms",
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        self.children: list[Child] = []

    def start(self) -> None:
        manage(self.env, "migrate", "--verbosity", "0")
        manage(self.env, "createsuperuser", "--noinput", "--username", OPERATOR, "--email", "ops@example.com")
        demo = Child.manage(
            "demo", "demoservices", "--port", str(self.demo_port), "--fail", "extract=429;cms=400",
            env=self.env, log=self.work / "demo.log",
        )  # fmt: skip
        self.children.append(demo)
        wait_until(
            answers(f"http://127.0.0.1:{self.demo_port}/"), timeout=60, what="demo services", child=demo
        )
        self.children.append(
            Child.manage("runner", "runworkflows", env=self.env, log=self.work / "runner.log")
        )
        argv = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.web_port),
            "config.asgi:application",
        ]
        web = Child("web", argv, env=self.env, log=self.work / "web.log")
        self.children.append(web)
        wait_until(answers(f"{self.web}/admin/login/"), timeout=60, what="web server", child=web)

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def submit(self, title: str) -> str:
        response = httpx2.post(
            f"{self.web}/jobs", json={"title": title, "transcript": SAMPLE.read_text()}, timeout=30
        )
        response.raise_for_status()
        return response.json()["jobId"]

    def job(self, job_id: str) -> dict[str, Any]:
        return httpx2.get(f"{self.web}/jobs/{job_id}", timeout=30).json()

    def review(self, key: str, title: str) -> None:
        """A reviewedBrief, which ends waiting for an operator's decision (the dashboard lists it)."""
        code = (
            "from jobs.workflows import registry; import sys, json; "
            f"h = registry.client('reviewedBrief').get_or_create([{key!r}]); "
            f"h.send('start', {{'title': {title!r}, 'transcript': open({str(SAMPLE)!r}).read()}})"
        )
        manage(self.env, "shell", "-c", code)


def shoot(app: App, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    failing = app.submit("Discovery call: Northwind Logistics")
    wait(lambda: app.job(failing)["status"] == "failed", "the first job to fail at publish")
    clean = app.submit("Renewal call: Initech Systems")
    app.review("review-7", "Expansion call: Acme Corp")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_context(viewport={"width": WIDTH, "height": 900}, base_url=app.web).new_page()
        page.set_default_timeout(60_000)
        page.goto("/admin/login/?next=/admin/")
        page.fill("#id_username", OPERATOR)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")

        # The operator replays the failed publish, as after a fix at the CMS.
        run_id = app.job(failing)["runId"]
        page.goto(f"/admin/workflows/run/{run_id}/inspect/")
        page.locator('[data-entry="publish"] > summary').get_by_text("Replay from here").click()
        page.fill("textarea[name=why]", "CMS rejected the post (INC-2041); fixed upstream")
        page.click("button[data-confirm=replay]")
        expect(page.locator("#run-live [data-run-status]")).to_have_attribute("data-run-status", "completed")
        wait(lambda: app.job(clean)["status"] == "completed", "the second job to complete")

        def decision_listed() -> bool:
            page.goto("/dashboard/")
            return page.locator("#wf-decisions a[data-choice]").count() > 0

        wait(decision_listed, "the reviewed brief to wait for a decision")
        expect(page.locator("[data-live-indicator].on")).to_be_visible()
        page.screenshot(path=str(out / "dashboard.png"), full_page=True, animations="disabled")

        page.goto(f"/admin/workflows/run/{run_id}/inspect/")
        expect(page.locator('.wf-step.superseded[data-entry="publish"]')).to_be_visible()
        page.locator('[data-entry="extract"] > summary').first.click()
        page.screenshot(path=str(out / "inspector.png"), full_page=True, animations="disabled")
        browser.close()
    print(json.dumps({"dashboard": str(out / "dashboard.png"), "inspector": str(out / "inspector.png")}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="Where the PNGs go (default docs/).")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="wf-screenshots-"))
    app = App(work)
    try:
        app.start()
        shoot(app, args.out)
    except BaseException:
        for child in app.children:
            print(f"--- {child.name}\n{child.output(3000)}", file=sys.stderr)
        raise
    finally:
        app.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
