"""`python manage.py runworkflows`: builds a Runner and runs it until SIGTERM/SIGINT."""

import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
import time
from collections import Counter, defaultdict

from django.core.management.base import BaseCommand, CommandError

from workflows import checks, conf, doctor
from workflows.bulk.executor import execute_pending_in_own_thread
from workflows.core.records import Commit, RunRecord
from workflows.engine.observers import Observer
from workflows.engine.runner import Periodic, Runner
from workflows.http import metrics as metrics_endpoint
from workflows.storage.django import DjangoStore
from workflows.storage.django.prune import prune_in_own_thread
from workflows.telemetry import metrics

logger = logging.getLogger("workflows.engine.runner")  # beside the runner's own "started" line


class Command(BaseCommand):
    help = "Run workflow runs: claim, execute, heartbeat; stop gracefully on SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--concurrency", type=int, default=10, help="Runs executed at once (default 10).")
        parser.add_argument("--until-idle", action="store_true", help="Exit once no run is due.")
        parser.add_argument(
            "--db-threads",
            type=int,
            default=4,
            help="Database connections the runner uses in parallel (PostgreSQL; SQLite uses 1).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Serve this runner's Prometheus metrics on this port (default: $WORKFLOWS_METRICS_PORT; "
            "none). Not needed with PROMETHEUS_MULTIPROC_DIR: the web's /metrics serves them.",
        )
        parser.add_argument(
            "--metrics-addr",
            default="0.0.0.0",  # Prometheus scrapes runners from inside the network
            help="Address the metrics port binds (default 0.0.0.0).",
        )

    def handle(
        self,
        *args,
        concurrency: int,
        until_idle: bool,
        db_threads: int,
        metrics_port: int | None,
        metrics_addr: str,
        **options,
    ):
        if metrics_port is None:
            metrics_port = _port_from_env()
        if metrics_port is not None and not 0 < metrics_port < 65536:
            raise CommandError(f"--metrics-port must be a port number (1-65535), not {metrics_port}.")
        shared = checks.sqlite_shared_runners()  # workflows.W004: several runners on one SQLite file
        if shared is not None:
            self.stderr.write(
                f"WARNING ({shared.id}): {shared.msg}\n  HINT: {shared.hint}", self.style.WARNING
            )
        threads = min(db_threads, concurrency)
        too_small = checks.runner_pool_too_small(threads, concurrency)  # workflows.E013
        if too_small is not None:
            raise CommandError(f"{too_small.id}: {too_small.msg}\n  HINT: {too_small.hint}")
        if metrics_port is not None:
            try:
                metrics_endpoint.serve_runner_metrics(metrics_port, metrics_addr)
            except OSError as exc:
                raise CommandError(f"cannot serve metrics on {metrics_addr}:{metrics_port}: {exc}") from exc
        store = DjangoStore(db_threads=threads)
        logger.info('store: the %s connector (WORKFLOWS["CONNECTOR"])', type(store.connector).__name__)
        tally = Tally() if until_idle else None
        started = time.monotonic()
        runner = Runner(
            registry=conf.registry(),
            store=store,
            concurrency=concurrency,
            lease_seconds=conf.lease_seconds(),
            heartbeat_seconds=conf.heartbeat_seconds(),
            stall_check=conf.stall_check(),
            commit_hooks=conf.commit_hooks(),
            observers=[*conf.observers(), *([tally] if tally else [])],
            periodic=_periodic(),
        )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, runner.request_stop)
            async with contextlib.AsyncExitStack() as lifespan:  # WORKFLOWS["RUNNER_LIFESPAN"]
                for enter in conf.runner_lifespans():
                    await lifespan.enter_async_context(enter())
                await runner.run(until_idle=until_idle)

        try:
            asyncio.run(main())
        finally:
            store.close()
            metrics.forget_this_process()  # multiprocess mode: its slots leave the sums
        if tally is not None:
            self.stdout.write(tally.summary(time.monotonic() - started))


class Tally(Observer):
    """What an `--until-idle` pass did, for the one line it prints when it ends (a runner that
    runs until stopped reports through its logs and metrics instead)."""

    def __init__(self) -> None:
        self.ended: Counter[tuple[str, str]] = Counter()
        self.attempts = 0

    def committed(self, run: RunRecord, commit: Commit) -> None:
        self.attempts += sum(1 for _entry, attempt in commit.entries if attempt is not None)

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        self.ended[(run.workflow, status)] += 1

    def summary(self, seconds: float) -> str:
        if not self.ended:
            return f"runworkflows --until-idle: nothing was due ({seconds:.1f} s)."
        outcomes: defaultdict[str, list[str]] = defaultdict(list)
        for (workflow, status), n in sorted(self.ended.items()):
            outcomes[workflow].append(f"{status} {n}")
        parts = [f"{workflow} {', '.join(counts)}" for workflow, counts in outcomes.items()]
        total = sum(self.ended.values())
        return (
            f"runworkflows --until-idle: {total} execution{'s' * (total != 1)} in {seconds:.1f} s, "
            f"{self.attempts} step attempt{'s' * (self.attempts != 1)}: " + "; ".join(parts) + "."
        )


def _periodic() -> list[Periodic]:
    """The runner's own housekeeping: pruning by WORKFLOWS["RETENTION"] every PRUNE_SECONDS,
    the doctor's cheap checks (exported as metrics) every DOCTOR_SECONDS, and the operators'
    bulk operations (workflows.bulk) every BULK_SECONDS."""
    jobs: list[Periodic] = []
    seconds = conf.prune_seconds()
    if seconds is not None:
        retention, batch = conf.retention(), conf.prune_batch()
        jobs.append((seconds, lambda: prune_in_own_thread(retention, batch_size=batch)))
    doctor_seconds = conf.doctor_seconds()
    if doctor_seconds is not None:
        jobs.append((doctor_seconds, doctor.check_in_own_thread))
    bulk_seconds = conf.bulk_seconds()
    if bulk_seconds is not None:
        jobs.append((bulk_seconds, execute_pending_in_own_thread))
    return jobs


def _port_from_env() -> int | None:
    """$WORKFLOWS_METRICS_PORT as a port number; a value that is not one stops the command."""
    value = os.environ.get("WORKFLOWS_METRICS_PORT", "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise CommandError(f"WORKFLOWS_METRICS_PORT must be a port number, not {value!r}.") from None
