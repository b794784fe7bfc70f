"""The system checks of workflows/checks/, each with the settings that trip it, and the SQLite
warning `runworkflows` prints when another runner holds live leases."""

from __future__ import annotations

import datetime as dt
import io
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from django.apps import apps
from django.core import checks as django_checks
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from workflows import checks, setup, workflow
from workflows.core.new_run import NewRun
from workflows.core.records import RunnerRecord
from workflows.engine import presence
from workflows.storage.django import DjangoStore

ROOT = Path(__file__).resolve().parents[2]
NOT_A_REGISTRY = {"greet": "not a registry"}
NOT_CALLABLE = 42


async def _noop(ctx):
    return None


TWIN = setup(use={"twin": workflow(_noop)})
TWIN_AGAIN = setup(use={"twin": workflow(_noop)})


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def workflow_checks() -> list[django_checks.CheckMessage]:
    """What `manage.py check --tag workflows` reports."""
    return django_checks.run_checks(tags=[checks.TAG])


def test_the_project_settings_pass(settings):
    assert workflow_checks() == []


def test_registered_with_the_workflows_tag():
    registered = django_checks.registry.registry.get_checks()
    assert {checks.check_settings, checks.check_registries, checks.check_inspector} <= set(registered)


# --- WORKFLOWS itself ---------------------------------------------------------------------------


def test_e001__workflows_is_not_a_dict():
    with override_settings(WORKFLOWS=["jobs.workflows.registry"]):
        [error] = checks.check_settings()
    assert error.id == "workflows.E001" and "must be a dict, not list" in error.msg


def test_e002__unknown_keys_are_reported_with_the_known_ones(settings):
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "LEASE_SECOND": 5, "REGISTRY": []}):
        errors = checks.check_settings()
    assert ids(errors) == ["workflows.E002"]
    assert "LEASE_SECOND, REGISTRY" in errors[0].msg and "LEASE_SECONDS" in errors[0].hint


def test_w001__the_old_flat_settings_are_no_longer_read():
    with override_settings(WORKFLOWS_REGISTRIES=["x.registry"], INSPECTOR_POLL_SECONDS=1):
        warnings = checks.check_settings()
    assert ids(warnings) == ["workflows.W001", "workflows.W001"]
    assert {w.hint for w in warnings} == {
        'Set WORKFLOWS["REGISTRIES"] instead.',
        'Set WORKFLOWS["POLL_SECONDS"] instead.',
    }


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"LEASE_SECONDS": 0}, 'LEASE_SECONDS"] must be a positive number of seconds, not 0'),
        ({"LEASE_SECONDS": "30"}, "not '30'"),
        ({"POLL_SECONDS": -1}, 'POLL_SECONDS"] must be a positive number'),
        ({"LEASE_SECONDS": 10, "HEARTBEAT_SECONDS": 10}, "must be shorter than"),
        ({"HEARTBEAT_SECONDS": 45}, '(45) must be shorter than WORKFLOWS["LEASE_SECONDS"] (30)'),
        ({"RUN_STREAM_TOKEN_SECONDS": 0}, 'RUN_STREAM_TOKEN_SECONDS"] must be a positive number'),
    ],
)
def test_e007__durations(given, expected):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], **given}):
        [error] = checks.check_settings()
    assert error.id == "workflows.E007" and expected in error.msg


@pytest.mark.parametrize("mode", ["token", "session", "open"])
def test_e009__run_stream_auth_takes_three_modes(mode):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], "RUN_STREAM_AUTH": mode}):
        assert checks.check_settings() == []
    with override_settings(
        WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], "RUN_STREAM_AUTH": mode.upper()}
    ):
        [error] = checks.check_settings()
    assert error.id == "workflows.E009" and f"not {mode.upper()!r}" in error.msg


@pytest.mark.parametrize("url", ["tempo.example/trace/{trace_id}", "https://tempo.example/trace/", 42])
def test_e010__trace_url_is_an_http_url_with_the_trace_id(url):
    base = {"REGISTRIES": ["jobs.workflows.registry"]}
    with override_settings(WORKFLOWS={**base, "TRACE_URL": "https://tempo.example/trace/{trace_id}"}):
        assert checks.check_settings() == []
    with override_settings(WORKFLOWS={**base, "TRACE_URL": url}):
        [error] = checks.check_settings()
    assert error.id == "workflows.E016" and repr(url) in error.msg


def test_e008__registries_must_be_a_list_of_paths():
    # A bare string would otherwise be read one character at a time.
    with override_settings(WORKFLOWS={"REGISTRIES": "jobs.workflows.registry"}):
        assert ids(checks.check_settings()) == ["workflows.E008"]


# --- the registries and commit hooks ------------------------------------------------------------


def test_w002__no_registry():
    with override_settings(WORKFLOWS={}, TASKS={}):
        assert ids(checks.check_registries()) == ["workflows.W002"]


def test_no_w002_when_only_the_tasks_backend_is_used():
    # The DurableBackend serves its built-in workflow without a registry: nothing to warn about.
    durable = {"default": {"BACKEND": "workflows.tasks.DurableBackend", "QUEUES": ["default"]}}
    with override_settings(WORKFLOWS={}, TASKS=durable):
        assert ids(checks.check_registries()) == []


def test_e003__a_registry_that_does_not_import_names_its_path_and_the_import_error():
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry", "shop.workflows.registry"]}):
        [error] = checks.check_registries()
    assert error.id == "workflows.E003"
    assert error.msg == (
        "WORKFLOWS[\"REGISTRIES\"] names 'shop.workflows.registry', which does not import: "
        "ModuleNotFoundError: No module named 'shop'"
    )


def test_e003__a_missing_attribute():
    with override_settings(WORKFLOWS={"REGISTRIES": ["tests.integration.test_checks.nothing_here"]}):
        [error] = checks.check_registries()
    assert error.id == "workflows.E003"
    assert "'tests.integration.test_checks.nothing_here', which does not import" in error.msg
    assert 'does not define a "nothing_here" attribute' in error.msg


def test_e004__not_a_registry():
    with override_settings(WORKFLOWS={"REGISTRIES": ["tests.integration.test_checks.NOT_A_REGISTRY"]}):
        [error] = checks.check_registries()
    assert error.id == "workflows.E004" and "which is a dict, not a workflows.Registry" in error.msg


def test_e005__one_name_in_two_registries():
    paths = ["tests.integration.test_checks.TWIN", "tests.integration.test_checks.TWIN_AGAIN"]
    with override_settings(WORKFLOWS={"REGISTRIES": paths}):
        [error] = checks.check_registries()
    assert error.id == "workflows.E005"
    assert error.msg == f"The workflow 'twin' is registered by both {paths[0]!r} and {paths[1]!r}."


def test_e006__commit_hooks_that_do_not_import_or_cannot_be_called(settings):
    hooks = ["inspector.live.on_commit", "inspector.live.nope", "tests.integration.test_checks.NOT_CALLABLE"]
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "COMMIT_HOOKS": hooks}):
        errors = checks.check_commit_hooks()
    assert ids(errors) == ["workflows.E006", "workflows.E006"]
    assert "'inspector.live.nope', which does not import" in errors[0].msg
    assert "'tests.integration.test_checks.NOT_CALLABLE', which is a int, not callable" in errors[1].msg


def test_e006_e008__runner_lifespans_must_be_dotted_paths_to_callables(settings):
    lifespans = ["jobs.services.http.service_clients", "jobs.services.http.nope"]
    with override_settings(WORKFLOWS={**settings.WORKFLOWS, "RUNNER_LIFESPAN": lifespans}):
        [error] = checks.check_commit_hooks()
    assert error.id == "workflows.E006"
    assert error.msg.startswith(
        "WORKFLOWS[\"RUNNER_LIFESPAN\"] names 'jobs.services.http.nope', which does not import"
    )
    with override_settings(
        WORKFLOWS={**settings.WORKFLOWS, "RUNNER_LIFESPAN": "jobs.services.http.service_clients"}
    ):
        assert "workflows.E008" in ids(checks.check_settings())


def test_a_registry_error_stops_manage_py_commands():
    from django.core.management.base import SystemCheckError

    with override_settings(WORKFLOWS={"REGISTRIES": ["shop.workflows.registry"]}):
        with pytest.raises(SystemCheckError, match=r"workflows\.E003"):
            call_command("check")


# --- SQLite -------------------------------------------------------------------------------------


def sqlite_settings(**options):
    return {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3", "OPTIONS": options}}


def test_w003__sqlite_without_immediate_transactions():
    # Django warns that overriding DATABASES affects no open connection: only the check reads it.
    with pytest.warns(UserWarning, match="DATABASES"):
        with override_settings(DATABASES=sqlite_settings()):
            plain = checks.check_sqlite()
        with override_settings(DATABASES=sqlite_settings(transaction_mode="IMMEDIATE")):
            immediate = checks.check_sqlite()
    assert ids(plain) == ["workflows.W003"] and immediate == []


# --- the inspector ------------------------------------------------------------------------------


def test_e010__channels_does_not_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "channels", None)  # `import channels` now raises ImportError
    errors = checks.check_inspector()
    assert ids(errors) == ["workflows.E010"] and "needs channels" in errors[0].msg


def test_e011__no_default_channel_layer():
    with override_settings(CHANNEL_LAYERS={}):
        assert ids(checks.check_inspector()) == ["workflows.E011"]


def test_w010__no_asgi_application():
    with override_settings(ASGI_APPLICATION=None):
        [warning] = checks.check_inspector()
    assert warning.id == "workflows.W010" and "inspector.routing.websocket_urlpatterns" in warning.msg


def test_the_inspector_checks_need_the_inspector(monkeypatch):
    monkeypatch.setattr(apps, "is_installed", lambda name: name != "inspector")
    with override_settings(CHANNEL_LAYERS={}, ASGI_APPLICATION=None):
        assert checks.check_inspector() == []


def test_e012__the_inspector_without_workflows_says_so_while_django_loads():
    # Checks never run when the app registry cannot load: InspectorConfig raises instead, in a
    # fresh process (a cold import, as a project would see it).
    script = textwrap.dedent(
        """
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[
            "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
            "django.contrib.sessions", "django.contrib.messages", "inspector",
        ])
        django.setup()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert (
        "ImproperlyConfigured: (workflows.E012) The 'inspector' app needs the 'workflows' app"
        in result.stderr
    )


# --- several runners on SQLite (runworkflows, workflows.W004) -------------------------------------


def _lease_a_run(owner: str, *, lapsed: bool = False) -> None:
    """A run held by `owner`, leased the way a runner leases it (the store's claim)."""
    store = DjangoStore()
    now = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120 if lapsed else 0)
    store.get_or_create_run(NewRun(workflow="held", key=[owner], version="v", initial_state={}, now=now))
    [claimed] = store.claim(owner=owner, workflows=["held"], limit=1, lease_seconds=60, now=now)
    assert claimed.status == "running"


@pytest.mark.django_db
def test_w004__another_runner_holds_live_leases_on_sqlite():
    _lease_a_run("host-a:101:aaaa")
    warning = checks.sqlite_shared_runners()
    if connection.vendor != "sqlite":
        assert warning is None  # PostgreSQL scales out: no warning
        return
    assert warning is not None and warning.id == "workflows.W004"
    assert "Another runner holds live leases on this SQLite database (host-a:101:aaaa)" in warning.msg
    assert "PostgreSQL" in warning.hint


@pytest.mark.django_db
def test_w004__lapsed_leases_and_an_empty_table_warn_of_nothing():
    assert checks.sqlite_shared_runners() is None
    _lease_a_run("host-b:202:bbbb", lapsed=True)
    assert checks.sqlite_shared_runners() is None


@pytest.mark.django_db
def test_w004__a_dead_runner_of_this_host_does_not_count():
    """Its leases are live, but its process is gone: the runner starting takes them over."""
    _lease_a_run("here:1:dead")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    now = dt.datetime.now(dt.UTC)
    record = RunnerRecord(
        owner="here:1:dead", host=presence.hostname(), pid=gone.pid, machine=presence.machine(),
        started_at=now, last_seen=now,
    )  # fmt: skip
    DjangoStore().register_runner(record)
    assert checks.sqlite_shared_runners() is None
    DjangoStore().register_runner(replace(record, host="elsewhere"))  # another host's: it counts
    assert (checks.sqlite_shared_runners() is None) == (connection.vendor != "sqlite")


@pytest.mark.django_db(transaction=True)
def test_w004__printed_by_runworkflows_at_start():
    _lease_a_run("host-c:303:cccc")
    err = io.StringIO()
    call_command("runworkflows", "--until-idle", stderr=err, stdout=io.StringIO())
    if connection.vendor == "sqlite":
        assert "WARNING (workflows.W004): Another runner holds live leases" in err.getvalue()
        assert "host-c:303:cccc" in err.getvalue()
    else:
        assert "W004" not in err.getvalue()


# --- retention and value sizes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected_id", "expected"),
    [
        ({"RETENTION": {"failed": -1}}, "workflows.E020", '"failed" must be a number of days'),
        ({"RETENTION": {"done": 3}}, "workflows.E020", "unknown key(s) done"),
        ({"RETENTION": [30]}, "workflows.E020", "must be a dict"),
        ({"PRUNE_BATCH": 0}, "workflows.E021", 'PRUNE_BATCH"] must be a positive integer'),
        ({"MAX_VALUE_BYTES": "1MB"}, "workflows.E021", 'MAX_VALUE_BYTES"] must be a positive integer'),
        ({"PRUNE_SECONDS": 0}, "workflows.E007", 'PRUNE_SECONDS"] must be a positive number'),
    ],
)
def test_e020_e021__retention_and_sizes(given, expected_id, expected):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], **given}):
        [error] = checks.check_settings()
    assert error.id == expected_id and expected in error.msg


def test_retention_and_sizes__valid_settings_pass():
    given = {
        "RETENTION": {"completed": 30, "cancelled": 30, "failed": 90, "audited": None},
        "PRUNE_SECONDS": None,
        "PRUNE_BATCH": 500,
        "MAX_VALUE_BYTES": None,
    }
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], **given}):
        assert checks.check_settings() == []


# --- the multi-host protections ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected_id"),
    [
        ({"CLOCK": "wall"}, "workflows.E022"),
        ({"CLOCK": "local"}, "workflows.W005"),
        ({"STALL_CHECK": False}, "workflows.W005"),
    ],
)
def test_e022_w005__the_clock_and_the_stall_check(given, expected_id):
    with override_settings(WORKFLOWS={"REGISTRIES": ["jobs.workflows.registry"], **given}):
        [message] = checks.check_settings()
    assert message.id == expected_id and "CLOCK" in message.msg


def test_the_protections_on__no_message():
    settings = {"REGISTRIES": ["jobs.workflows.registry"], "CLOCK": "database", "STALL_CHECK": True}
    with override_settings(WORKFLOWS=settings):
        assert checks.check_settings() == []
