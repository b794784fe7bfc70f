"""Project settings, read from environment variables (all listed in docs/configuration.md)."""

import json
import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY") or "dev-insecure-secret-key-change-me-in-production-0123456789"
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # /api/docs serves Ninja's bundled Swagger UI from static files: no CDN
    "workflows",
    "jobs",
    "inspector",
]

MIDDLEWARE = [
    # Django's own, run inline on the event loop under ASGI (config/middleware.py: no thread hop
    # per hook), in Django's order and with its behaviour.
    "config.middleware.SecurityMiddleware",
    # Every error under /api/ and /jobs in the one JSON shape: unknown URLs, 405s, 500s included.
    "workflows.http.JsonErrorsMiddleware",
    "config.middleware.SessionMiddleware",
    "config.middleware.CommonMiddleware",
    "config.middleware.CsrfViewMiddleware",
    "config.middleware.AuthenticationMiddleware",
    "config.middleware.MessageMiddleware",
    "config.middleware.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
# SQLite file by default so a fresh clone runs with no server; PostgreSQL in production.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}"),
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    (BASE_DIR / "var").mkdir(exist_ok=True)
    # NORMAL: a commit survives the process crashing, but the last ones may roll back if the
    # machine loses power or the OS crashes; FULL: every commit waits for the disk (slower).
    SQLITE_SYNCHRONOUS = os.environ.get("SQLITE_SYNCHRONOUS", "NORMAL").strip().upper()
    if SQLITE_SYNCHRONOUS not in ("NORMAL", "FULL"):
        raise ImproperlyConfigured(f"SQLITE_SYNCHRONOUS must be NORMAL or FULL, not {SQLITE_SYNCHRONOUS!r}")
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE transactions take the write lock up front, so two processes never
        # deadlock upgrading a read lock; WAL lets readers run beside the one writer.
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": (
            f"PRAGMA journal_mode=WAL; PRAGMA synchronous={SQLITE_SYNCHRONOUS}; PRAGMA busy_timeout=30000;"
        ),
    }
    # Tests use a file too: acceptance tests start real runner processes that must see it.
    # One file per test process, so two test sessions on one machine never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / f"test_db_{os.getpid()}.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_POOL", True):
    # A pool per process (Django's, psycopg_pool): without it every in-flight request opens its
    # own server connection and a burst exhausts max_connections. Each request borrows one
    # connection and returns it when the request ends (CONN_MAX_AGE must stay 0 with a pool).
    # The web tier's timeout is short on purpose: a request that cannot get a connection within
    # it would miss any latency goal anyway, and a quick 503 with Retry-After
    # (workflows/http/errors.py) sheds load where a queue of waiting threads would slow every request down.
    # The runner sizes nothing itself: `runworkflows` refuses to start with a pool too small for
    # its --db-threads and sync steps (workflows.E013).
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),  # the URL's own (?sslmode=, ?connect_timeout=)
        "pool": {
            "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "2")),
            "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "20")),
            "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "1")),
            # Requests allowed to queue for a connection; more fail at once (0: no limit).
            "max_waiting": int(os.environ.get("DATABASE_POOL_MAX_WAITING", "0")),
            # psycopg_pool retries a lost connection with a doubling delay until this many seconds,
            # then gives up and tries anew at the next request: it bounds how long the pool may
            # stay empty after the server is back (its default, 300 s, allows minutes).
            "reconnect_timeout": 5.0,
        },
    }
    # The pool checks a connection before lending it (one empty round trip), so no request gets
    # a connection the server dropped (a restart, an idle timeout) and fails for that.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits for ever on a server that drops packets (a network partition) unless told
    # otherwise: a connect stuck there holds one of the pool's few connecting workers for the
    # kernel's SYN retries (about 2 minutes), so a process would stay without connections that long
    # after the network heals. A URL's own ?connect_timeout= wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", int(os.environ.get("DATABASE_CONNECT_TIMEOUT", "5"))
    )
    # The same for a connection already open: a statement sent into a partition waits out TCP's
    # retransmissions, whose gaps double (0.2, 0.4 ... 120 s), so after the network heals the
    # answer comes only at the next retransmission, as late again as the cut lasted, and a
    # runner stays deaf that long (seen in the multi-host test). The kernel drops a connection
    # whose data goes unacknowledged for DATABASE_TCP_USER_TIMEOUT seconds (libpq's
    # tcp_user_timeout); the engine then reconnects. An idle connection is left alone: it comes
    # back as it was when the network heals (the runner's LISTEN connection alone also probes
    # with keepalives, workflows/storage/django/notify.py). 0 leaves the kernel's default.
    _tcp_user_timeout = float(os.environ.get("DATABASE_TCP_USER_TIMEOUT", "10"))
    if _tcp_user_timeout > 0:
        DATABASES["default"]["OPTIONS"].setdefault("tcp_user_timeout", int(_tcp_user_timeout * 1000))

# A streaming replica for the operators' list reads (WORKFLOWS["READ_DATABASE"], workflows/
# read_source.py): the dashboard, the admin's lists, GET /api/runs. Nothing a run depends on reads
# it. A short connect timeout (unless the URL sets one): an unreachable replica costs a page two
# seconds once, then the lists read the primary for a while. Tests never create a database for it:
# it mirrors the default one (tests/conftest.py keeps the suite's reads on the primary).
READ_DATABASE_URL = os.environ.get("READ_DATABASE_URL", "").strip()
if READ_DATABASE_URL:
    DATABASES["replica"] = dj_database_url.parse(READ_DATABASE_URL, conn_max_age=0)
    if DATABASES["replica"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["replica"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
        if "pool" in DATABASES["default"].get("OPTIONS", {}):
            DATABASES["replica"]["OPTIONS"]["pool"] = dict(DATABASES["default"]["OPTIONS"]["pool"])
            DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"

# --- Load shedding (config/shedding.py) --------------------------------------------
# HTTP requests one web process takes on at once; more are answered 503 with Retry-After at once,
# before Django spends anything on them (0: no limit). WebSockets do not count.
WEB_MAX_IN_FLIGHT = int(os.environ.get("WEB_MAX_IN_FLIGHT", "64"))

# --- Channels -------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Workflows ------------------------------------------------------------------
# The engine's and the inspector's settings, in one dict (every key and its default: workflows/conf.py).
# This project fills it from environment variables, named in docs/configuration.md.
_lease_seconds = float(os.environ.get("WORKFLOWS_LEASE_SECONDS", "30"))


def _json_setting(name: str, default: Any) -> Any:
    """A setting given as JSON in an environment variable (unset or empty: `default`)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc}") from None


def _optional_number(name: str, default: str = "") -> float | None:
    """An environment variable as a number; empty or "none" means None (keep forever, no limit)."""
    raw = os.environ.get(name, default).strip()
    return None if raw.lower() in ("", "none") else float(raw)


WORKFLOWS = {
    # Dotted paths of the Registry objects the runner, API and inspector serve.
    "REGISTRIES": [
        r.strip()
        for r in os.environ.get(
            "WORKFLOWS_REGISTRIES", "jobs.workflows.registry,jobs.agent_workflow.registry"
        ).split(",")
        if r.strip()
    ],
    # Seconds a run stays held after its runner's last heartbeat; another runner resumes it after that.
    "LEASE_SECONDS": _lease_seconds,
    "HEARTBEAT_SECONDS": float(os.environ.get("WORKFLOWS_HEARTBEAT_SECONDS", str(_lease_seconds / 3))),
    # Shared decisions on the database's clock ("database") or each host's own ("local": one host
    # only); a runner's check of its lease before each step. Both switch off only to see the
    # multi-host tests fail.
    "CLOCK": os.environ.get("WORKFLOWS_CLOCK", "database"),
    "STALL_CHECK": env_bool("WORKFLOWS_STALL_CHECK", True),
    # Async callables `hook(run_id, commit)` the runner calls after each commit. The inspector's
    # pokes live consumers through the channel layer; without Redis a poke cannot leave the
    # runner's process (consumers then re-read the database every 0.5 s), so none is sent.
    "COMMIT_HOOKS": ["inspector.live.on_commit"] if REDIS_URL else [],
    # Entered around each runner's life: the example's model, CRM and CMS clients, one per service,
    # keep their connections between steps (see jobs/services/http.py).
    "RUNNER_LIFESPAN": ["jobs.services.http.service_clients"],
    # Who may follow a run's WebSocket: "token" (a session with workflows.view_run, or the signed
    # token /jobs hands out), "session" or "open" (anyone with the run id). See inspector/access.py.
    "RUN_STREAM_AUTH": os.environ.get("WORKFLOWS_RUN_STREAM_AUTH", "token"),
    "RUN_STREAM_TOKEN_SECONDS": float(os.environ.get("WORKFLOWS_RUN_STREAM_TOKEN_SECONDS", "3600")),
    # The inspector links a run's trace id here, e.g. https://tempo.example/trace/{trace_id}.
    "TRACE_URL": os.environ.get("WORKFLOWS_TRACE_URL") or None,
    # Days finished runs are kept, by status (unset: forever), and after a run's last audit entry;
    # the runner prunes every PRUNE_SECONDS (`manage.py prune` does it now). See workflows/conf.py.
    "RETENTION": {
        key: _optional_number(f"WORKFLOWS_RETENTION_{key.upper()}_DAYS", default)
        for key, default in (("completed", ""), ("cancelled", ""), ("failed", ""), ("audited", "365"))
    },
    "PRUNE_SECONDS": _optional_number("WORKFLOWS_PRUNE_SECONDS", "600"),
    "PRUNE_BATCH": int(os.environ.get("WORKFLOWS_PRUNE_BATCH", "100")),
    # Runners execute operators' bulk operations (manage.py workflows bulk, /dashboard/bulk/).
    "BULK_SECONDS": _optional_number("WORKFLOWS_BULK_SECONDS", "2"),
    "BULK_BATCH": int(os.environ.get("WORKFLOWS_BULK_BATCH", "200")),
    "BULK_PACE_SECONDS": float(os.environ.get("WORKFLOWS_BULK_PACE_SECONDS", "10")),
    # PostgreSQL: connections of the web process's own for async starts and reads (POST /jobs),
    # besides the pool's; 0: those go through Django's thread and the pool.
    "ASYNC_CONNECTIONS": int(os.environ.get("WORKFLOWS_ASYNC_CONNECTIONS", "4")),
    # The largest recorded value (step input or output, state, message body...), as JSON bytes.
    "MAX_VALUE_BYTES": int(os.environ.get("WORKFLOWS_MAX_VALUE_BYTES", str(1024 * 1024))),
    # Model prices, USD per million tokens, by model name: cost on the run page and the dashboard,
    # e.g. WORKFLOWS_MODEL_PRICES='{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}'.
    "MODEL_PRICES": _json_setting("WORKFLOWS_MODEL_PRICES", {}),
    # GET /metrics requires `Authorization: Bearer <token>` when set; open otherwise.
    "METRICS_TOKEN": os.environ.get("METRICS_TOKEN") or None,
    # The alias the dashboard, the admin's lists and GET /api/runs read (READ_DATABASE_URL above).
    "READ_DATABASE": "replica" if READ_DATABASE_URL else None,
}

# --- Django tasks (the django-tasks backport of django.tasks) ----------------------
# Every @task enqueued is a durable run of the built-in workflow `django.task` (docs/tasks.md:
# "Django tasks, durably"). OPTIONS are the defaults of `@task(max_attempts=, backoff=, timeout=)`.
TASKS = {
    "default": {
        "BACKEND": "workflows.tasks.DurableBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"max_attempts": 1, "backoff": 1.0, "backoff_max": 300.0, "timeout": None},
    }
}

# --- Example app (jobs) ---------------------------------------------------------
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
OPENAI_MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
CRM_API_URL = os.environ.get("CRM_API_URL", "http://127.0.0.1:8001/crm")
CMS_API_URL = os.environ.get("CMS_API_URL", "http://127.0.0.1:8001/cms")
PORT = int(os.environ.get("PORT", "8000"))
JOBS_REQUIRE_API_KEY = env_bool("JOBS_REQUIRE_API_KEY", False)
# Largest body POST /jobs accepts; a bigger one is refused with 413 before it is parsed.
JOBS_MAX_BODY_BYTES = int(os.environ.get("JOBS_MAX_BODY_BYTES", str(1024 * 1024)))

# WORKFLOWS_LOG_JSON=1: one JSON object per line (python-json-logger), with the structured fields
# of the engine's activity lines (logger `workflows.activity`: run_id, step, attempt, outcome, ...).
LOG_JSON = env_bool("WORKFLOWS_LOG_JSON")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json" if LOG_JSON else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
