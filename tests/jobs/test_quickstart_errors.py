"""`make demo` / `quickstart` stops before starting anything when it cannot work, and says the
exact command to run next: other free ports when one is taken, a fresh database when its migration
history does not match the code."""

from __future__ import annotations

import re
import socket
import subprocess

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from jobs.management.commands import quickstart
from tests.support import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def taken():
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def run_quickstart(*args: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("quickstart", *args, "--exit-after-job")
    return str(refused.value)


def test_a_taken_web_port__names_the_make_command_with_a_free_one(taken):
    demo = free_port()
    message = run_quickstart("--via-make", "--port", str(taken), "--demo-port", str(demo))
    suggested = re.search(rf"make demo PORT=(\d+) DEMO_PORT={demo}$", message)
    assert suggested, message
    assert f"port {taken} (web server) is in use" in message
    new = int(suggested.group(1))
    assert new > taken and quickstart.port_free("127.0.0.1", new)


def test_a_taken_demo_port__names_the_manage_command_when_not_run_by_make(taken):
    web = free_port()
    message = run_quickstart("--port", str(web), "--demo-port", str(taken))
    assert f"port {taken} (demo services) is in use" in message
    assert re.search(rf"manage\.py quickstart --port {web} --demo-port (\d+)$", message), message


def test_the_same_port_twice_is_refused(taken):
    port = free_port()
    message = run_quickstart("--via-make", "--port", str(port), "--demo-port", str(port))
    assert f"cannot share port {port}" in message and f"make demo PORT={port} DEMO_PORT=" in message


def test_the_makefile_passes_the_ports_through():
    dry = subprocess.run(
        ["make", "-n", "demo", "PORT=8123", "DEMO_PORT=8124"], capture_output=True, text=True, check=True
    )
    assert "manage.py quickstart --via-make --port 8123 --demo-port 8124" in dry.stdout


def test_a_migration_history_the_code_does_not_match__names_a_fresh_start():
    """A migration recorded as applied before one it depends on: `migrate` cannot go on."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, app, name, applied FROM django_migrations WHERE app = 'workflows' AND name LIKE '0004%'"
        )
        row = cursor.fetchone()
        cursor.execute("DELETE FROM django_migrations WHERE id = %s", [row[0]])
    try:
        message = run_quickstart("--via-make", "--port", str(free_port()), "--demo-port", str(free_port()))
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO django_migrations (id, app, name, applied) VALUES (%s, %s, %s, %s)", row
            )
    assert "holds a migration history this code does not match" in message
    assert "workflows.0005" in message
    if connection.vendor == "sqlite":
        assert re.search(
            r"Start from a fresh database: mv \S+ \S+\.old && make demo PORT=\d+ DEMO_PORT=\d+$", message
        )
    else:
        assert "showmigrations" in message


def test_no_model_change_lacks_its_migration():
    """What the quick start checks before migrating: this tree has every migration it needs."""
    assert quickstart.unmade_migrations() == []
