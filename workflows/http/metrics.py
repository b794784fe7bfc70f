"""What `GET /metrics` serves, and to whom.

- The metrics: with `PROMETHEUS_MULTIPROC_DIR` set, every process's files in that directory
  added up (the runners' and the web's); without it, this process's own (the runners then serve
  theirs with `runworkflows --metrics-port`). Either way, plus gauges read from the database at
  scrape time (`DatabaseCollector`): live runs by status, the backlog and its oldest run's
  lateness, by workflow.
- Access: open unless `WORKFLOWS["METRICS_TOKEN"]` is set; then only `Authorization: Bearer
  <token>` (anything else gets a plain 401).
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Iterable, Iterator

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from .. import conf
from ..core.records import LIVE
from ..reads import backlog
from ..telemetry.metrics import multiprocess_dir
from .errors import UNAVAILABLE

logger = logging.getLogger(__name__)

# What a database that is away raises: Django's errors, the pool's and the driver's (errors.py).
READ_FAILURES: tuple[type[Exception], ...] = (DatabaseError, *UNAVAILABLE)


class DatabaseCollector(Collector):
    """Gauges read from run rows on each scrape, by bounded, indexed queries (`workflows.reads.backlog`).
    Every served workflow gets a series, zero when it has no runs, so alerts see a value. When the
    database does not answer, `workflows_database_up` is 0 and the other gauges are left out."""

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("workflows_database_up", "1 when /metrics could read the runs table.")
        names = conf.registry().names()
        try:
            counts = backlog.live_counts()
            behind = backlog.backlog(workflows=names, lateness=False)
        except READ_FAILURES:
            logger.exception("/metrics: reading the runs table failed")
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        runs = GaugeMetricFamily(
            "workflows_runs",
            "Live runs by workflow and status, from the database.",
            labels=["workflow", "status"],
        )
        for workflow in sorted(set(names) | {w for w, _s in counts}):
            for status in LIVE:
                runs.add_metric([workflow, str(status)], counts.get((workflow, status), 0))
        due = GaugeMetricFamily(
            "workflows_backlog_runs",
            "Runs due now that no runner has claimed (pending or waiting, wake_at passed).",
            labels=["workflow"],
        )
        oldest = GaugeMetricFamily(
            "workflows_backlog_oldest_seconds",
            "How late the oldest due, unclaimed run is (0 when none is due).",
            labels=["workflow"],
        )
        stalled = GaugeMetricFamily(
            "workflows_stalled_runs",
            "Running runs whose lease lapsed (their runner died).",
            labels=["workflow"],
        )
        for row in behind:
            due.add_metric([row.workflow], row.due)
            oldest.add_metric([row.workflow], row.oldest_due_seconds or 0.0)
            stalled.add_metric([row.workflow], row.stalled)
        return [up, runs, due, oldest, stalled]


class _Together(Collector):
    """Several collectors read as one (what generate_latest needs: a `collect()`)."""

    def __init__(self, *sources: Collector) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        for source in self.sources:
            yield from source.collect()


def collector(*, database: bool = True) -> Collector:
    """What a scrape reads: every process's files (multiprocess mode) or this process's metrics,
    with the database gauges unless `database=False` (a runner's own endpoint)."""
    directory = multiprocess_dir()
    if directory is not None:
        processes = CollectorRegistry()
        MultiProcessCollector(processes, path=directory)
        source: Collector = processes
    else:
        source = REGISTRY
    return _Together(source, DatabaseCollector()) if database else source


def serve_runner_metrics(port: int, addr: str = "0.0.0.0") -> threading.Thread:
    """A runner's own `/metrics` on `addr:port` (prometheus_client's HTTP server, in a daemon
    thread): its metrics, or every process's in multiprocess mode; no database gauges (the web's
    /metrics serves those) and no token (bind it where only the scraper reaches). OSError when the
    port is taken."""
    _server, thread = start_http_server(port, addr=addr, registry=collector(database=False))
    return thread


def authorized(request: HttpRequest) -> bool:
    """No token configured: anyone (Prometheus scrapes from inside the network). Otherwise the
    request must carry `Authorization: Bearer <token>`."""
    token = conf.get("METRICS_TOKEN")
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), str(token).encode())


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """`GET /metrics` in Prometheus' text format (OpenMetrics when the scraper asks for it)."""
    if not authorized(request):
        response = HttpResponse("401 Unauthorized: a metrics token is required\n", status=401)
        response["Content-Type"] = "text/plain; charset=utf-8"
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(collector()), content_type=content_type)
