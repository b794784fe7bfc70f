"""The docs' "Add it to your project" page (docs/install.md), done for real: build the wheel of
this checkout, install it with its dependencies from PyPI into a fresh virtualenv, `django-admin
startproject`, then run or write every code block of that page, in order, as the
`<!-- install-test: ... -->` comment above it says (so the page and this test cannot drift apart). Then look at the run it started
the way an operator and a client would: the admin inspector (a superuser, Django's test client),
the API (the key `manage.py workflows apikey create` printed) and the WebSocket.

About a minute, most of it pip; PyPI is the only network it needs. CI runs it once, on the SQLite
pass (`SKIP_INSTALL_TEST=1` on the PostgreSQL pass: the new project is on SQLite either way).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from workflows.core.ids import short_run_id

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "install.md"
SECTION = "# Add it to your project"
PACKAGE = "django-durable-workflows"
DIRECTIVE = re.compile(
    r"<!-- install-test: (?P<action>shell|write|append)(?: (?P<path>\S+))? -->\n```\w*\n(?P<body>.*?)```",
    re.S,
)
PIP_INSTALL = re.compile(rf'^pip install "?{PACKAGE}(?P<extras>\[[\w,]+\])?"?$', re.M)
API_KEY = re.compile(r"\bwf_[A-Za-z0-9_-]{43}\b")
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
STEPS = ["load-profile", "send-email"]
# Settings and paths of this repository that must not leak into the new project's processes.
LEAKS = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")

pytestmark = [
    pytest.mark.install,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.environ.get("SKIP_INSTALL_TEST") == "1", reason="SKIP_INSTALL_TEST=1"),
]


@dataclass
class Step:
    action: str  # shell: run the block with bash; write: the block is the file; append: add it
    path: str | None
    body: str


def page_section() -> str:
    """The whole page: its title is the section's, and it holds nothing else."""
    text = PAGE.read_text()
    start = text.index(SECTION)
    return text[start:]


def page_steps() -> list[Step]:
    return [Step(**m.groupdict()) for m in DIRECTIVE.finditer(page_section())]


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
    if result.returncode != 0:
        raise AssertionError(
            f"{shlex.join(args)} exited with {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result.stdout


# What an operator and an API client see of the run, collected inside the new project (its own
# virtualenv and settings) and printed as JSON for the tests below.
LOOK = textwrap.dedent(
    """
    import asyncio, json, os, sys

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
    import django

    django.setup()
    from asgiref.testing import ApplicationCommunicator
    from django.contrib.auth import get_user_model
    from django.contrib.staticfiles import finders
    from django.template.loader import get_template
    from django.test import Client
    from django.test.utils import setup_test_environment

    from workflows.models import Run

    setup_test_environment()  # lets the test client's host in
    run_id, key = sys.argv[1:3]
    run = Run.objects.get(id=run_id)
    seen = {"run": {"workflow": run.workflow, "key": run.key, "status": run.status, "result": run.result}}

    operator = get_user_model().objects.create_superuser("operator", "ops@example.com", "unused-password")
    browser = Client()
    browser.force_login(operator)


    def page(path):
        response = browser.get(path, follow=True)
        html = response.content.decode()
        return {"status": response.status_code, "path": response.request["PATH_INFO"], "html": html}


    seen["admin_index"] = page("/admin/")
    seen["run_list"] = page("/admin/workflows/run/")
    seen["run_page"] = page(f"/admin/workflows/run/{run_id}/change/")
    seen["dashboard"] = page("/ops/")

    client = Client()
    bearer = {"Authorization": f"Bearer {key}"}
    for name, path, headers in [
        ("api_run", f"/api/runs/{run_id}", bearer),
        ("api_unknown_run", "/api/runs/00000000-0000-4000-8000-000000000000", bearer),
        ("api_without_key", f"/api/runs/{run_id}", {}),
    ]:
        response = client.get(path, headers=headers)
        seen[name] = {"status": response.status_code, "json": response.json()}

    seen["files"] = {
        "template": get_template("admin/workflows/run/inspect.html").origin.name,
        "static": finders.find("inspector/live.js"),
    }


    async def follow():
        from inspector.access import run_stream_token
        from mysite.asgi import application

        # As a client given the run's stream token would, from a page on an allowed host.
        token = run_stream_token(run_id).encode()
        headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
        scope = {"type": "websocket", "path": f"/ws/runs/{run_id}/", "query_string": b"token=" + token, "headers": headers}
        ws = ApplicationCommunicator(application, {**scope, "subprotocols": []})
        await ws.send_input({"type": "websocket.connect"})
        received = [await ws.receive_output(10), await ws.receive_output(10)]
        await ws.send_input({"type": "websocket.disconnect", "code": 1000})
        await ws.wait(10)
        return received


    seen["websocket"] = asyncio.run(follow())
    print(json.dumps(seen))
    """
)


@dataclass
class Installed:
    wheel: Path
    venv: Path
    project: Path
    env: dict[str, str]
    outputs: list[str]  # each shell block's stdout
    run_id: str
    api_key: str
    seen: dict

    def manage(self, *args: str) -> str:
        return run([str(self.venv / "bin" / "python"), "manage.py", *args], cwd=self.project, env=self.env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("install")
    dist, venv, project = work / "dist", work / "venv", work / "project"
    project.mkdir()

    run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet", "-w", str(dist)], cwd=work)
    [wheel] = dist.glob("*.whl")
    run([sys.executable, "-m", "venv", str(venv)], cwd=work)

    env = {k: v for k, v in os.environ.items() if k not in LEAKS and not k.startswith("WORKFLOWS_")}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}

    outputs = []
    installs = 0
    for step in page_steps():
        if step.action == "shell":
            # The package is not on PyPI: `pip install` gets the wheel built above, extras and all.
            script, count = PIP_INSTALL.subn(
                lambda m: "pip install --quiet " + shlex.quote(str(wheel) + (m.group("extras") or "")),
                step.body,
            )
            installs += count
            outputs.append(run(["bash", "-euxo", "pipefail", "-c", script], cwd=project, env=env))
        else:
            target = project / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w" if step.action == "write" else "a") as f:
                f.write(step.body if step.action == "write" else "\n" + step.body)
    assert installs == 1, f"the section must `pip install {PACKAGE}` once"

    [run_id] = [m for out in outputs for m in UUID.findall(out)]  # printed by the page's shell -c
    [api_key] = [m for out in outputs for m in API_KEY.findall(out)]  # printed once by apikey create
    (project / "look.py").write_text(LOOK)
    look = run([str(venv / "bin" / "python"), "look.py", run_id, api_key], cwd=project, env=env)
    seen = json.loads(look.strip().splitlines()[-1])
    return Installed(wheel, venv, project, env, outputs, run_id, api_key, seen)


# --- the page itself (no install needed) ------------------------------------------------------


def test_every_code_block_of_the_section_is_run_or_written():
    section = page_section()
    steps = page_steps()
    assert len(re.findall(r"^```\w+$", section, re.M)) == len(steps), "a code block without install-test"
    assert [s.action for s in steps if s.action == "shell"] == ["shell", "shell"]
    assert {s.path for s in steps if s.path} >= {"mysite/settings.py", "mysite/urls.py", "mysite/asgi.py"}


# --- the package ---------------------------------------------------------------------------------


def test_the_wheel_holds_the_two_apps_with_migrations_templates_and_static_files(installed):
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert {n.split("/")[0] for n in names} == {
        "workflows",
        "inspector",
        "django_durable_workflows-0.1.0.dist-info",
    }
    for name in [
        "workflows/migrations/0001_initial.py",
        "workflows/management/commands/runworkflows.py",
        "inspector/migrations/0001_initial.py",
        "inspector/templates/inspector/dashboard.html",
        "inspector/templates/inspector/_admin_links.html",
        "inspector/templates/admin/workflows/run/inspect.html",
        "inspector/templates/admin/workflows/run/change_list.html",
        "inspector/static/inspector/live.js",
        "inspector/static/inspector/inspector.css",
    ]:
        assert name in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.endswith("admin/index.html")]  # never shadows a project's
    requires = {
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")
    }
    assert "Requires-Python: >=3.11" in metadata
    assert {"django<7,>=5.2", "django-ninja<2,>=1.6", "channels<5,>=4.2"} <= requires
    assert "psycopg[binary,pool]<4,>=3.1.8; extra == 'postgres'" in requires
    assert "channels-redis<5,>=4.2; extra == 'redis'" in requires
    assert not [r for r in requires if r.startswith(("httpx", "daphne", "dj-database-url"))]


def test_the_pages_project_passes_every_system_check(installed):
    out = installed.manage("check", "--fail-level", "WARNING")
    assert "System check identified no issues" in out


def test_templates_and_static_files_come_from_the_installed_package(installed):
    site_packages = str(installed.venv / "lib")
    assert installed.seen["files"]["template"].startswith(site_packages)
    assert installed.seen["files"]["static"].startswith(site_packages)


# --- the run, as an operator and a client see it ------------------------------------------------


def test_runworkflows_until_idle_finished_the_run(installed):
    assert installed.seen["run"] == {
        "workflow": "welcome",
        "key": ["ada@example.com"],
        "status": "completed",
        "result": "welcome mail sent to Ada",
    }


def test_the_admin_inspector_shows_the_run_and_its_steps(installed):
    seen = installed.seen
    page = seen["run_page"]
    assert page["status"] == 200 and page["path"] == f"/admin/workflows/run/{installed.run_id}/inspect/"
    assert all(step in page["html"] for step in STEPS)
    assert "welcome mail sent to Ada" in page["html"]
    assert seen["run_list"]["status"] == 200 and short_run_id(installed.run_id) in seen["run_list"]["html"]
    assert seen["dashboard"]["status"] == 200 and "Operator dashboard" in seen["dashboard"]["html"]
    # The page's admin index includes the inspector's links.
    assert seen["admin_index"]["status"] == 200 and 'href="/ops/"' in seen["admin_index"]["html"]


def test_the_api_serves_the_run_to_a_key_and_errors_in_one_shape(installed):
    seen = installed.seen
    run = seen["api_run"]
    assert run["status"] == 200
    assert (run["json"]["id"], run["json"]["status"]) == (installed.run_id, "completed")
    assert [s["name"] for s in run["json"]["steps"]] == STEPS
    assert seen["api_unknown_run"]["status"] == 404
    assert seen["api_unknown_run"]["json"]["error"]["code"] == "not_found"
    assert seen["api_without_key"] == {
        "status": 401,
        "json": {
            "error": {
                "code": "unauthorized",
                "message": "a valid API key is required (Authorization: Bearer …)",
                "detail": None,
            }
        },
    }


def test_the_websocket_streams_the_runs_events(installed):
    accepted, first = installed.seen["websocket"]
    assert accepted["type"] == "websocket.accept"
    assert first["type"] == "websocket.send"
    event = json.loads(first["text"])
    assert (event["event"], event["data"]) == ("progress", {"sent": "ada@example.com"})
