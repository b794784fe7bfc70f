"""Prometheus metrics of the runner, from what it stored (an Observer: see engine/observers.py).

Every figure comes from a commit, the start or end of an execution, or the runner's own sample,
so a replayed entry (which writes nothing) is never counted again. Labels are bounded: the
workflow, the step (see `step_label`), an attempt's outcome, a run's status, a queue and a token
kind; never a run id or a key.

Metrics live in prometheus_client's default registry. With `PROMETHEUS_MULTIPROC_DIR` set before
the process starts, every process writes them to files there and the web's `/metrics` adds them up
(`workflows.http.metrics`); without it, each process serves its own (`runworkflows --metrics-port`).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import threading

from prometheus_client import Counter, Gauge, Histogram

from ..core.clock import Clock
from ..core.costs import tokens_of
from ..core.records import TERMINAL, Commit, RunRecord
from ..engine.observers import Observer, RunnerSample

MAX_STEP_LABELS = 200  # distinct step labels per workflow and process; more share OTHER_STEP
OTHER_STEP = "(other)"

_NUMBER = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")

# Seconds. Steps call models (minutes at worst), runs may wait on people for days.
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, float("inf"))
RUN_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600, float("inf"))
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, float("inf"))

RUNS_STARTED = Counter("workflows_runs_started", "Runs executed for the first time.", ["workflow"])
RUNS_FINISHED = Counter(
    "workflows_runs_finished", "Runs that ended (completed, failed, cancelled).", ["workflow", "status"]
)
RUN_DURATION = Histogram(
    "workflows_run_duration_seconds",
    "From a run's creation to its end.",
    ["workflow", "status"],
    buckets=RUN_BUCKETS,
)
STEP_ATTEMPTS = Counter(
    "workflows_step_attempts",
    "Step attempts recorded, by outcome (ok, error, timeout, critical).",
    ["workflow", "step", "outcome"],
)
STEP_DURATION = Histogram(
    "workflows_step_duration_seconds",
    "How long one step attempt ran, by outcome.",
    ["workflow", "step", "outcome"],
    buckets=STEP_BUCKETS,
)
STEP_RETRIES = Counter(
    "workflows_step_retries", "Failed step attempts that another attempt follows.", ["workflow", "step"]
)
SCHEDULE_TO_START = Histogram(
    "workflows_schedule_to_start_seconds",
    "From the moment a run was due (created, woken, retry or lease lapsed) to a runner claiming it.",
    ["workflow"],
    buckets=LATENESS_BUCKETS,
)
LEASES_LOST = Counter(
    "workflows_leases_lost", "Executions cut off because another runner holds the run now.", ["workflow"]
)
MESSAGES_SENT = Counter(
    "workflows_messages_sent",
    "Messages steps and workflows sent, by the sender and the queue.",
    ["workflow", "queue"],
)
MODEL_TOKENS = Counter(
    "workflows_model_tokens",
    "Model tokens steps recorded in step.meta['usage'], by kind (prompt, completion; total when the"
    " usage is not split).",
    ["workflow", "step", "kind"],
)
# Per runner process; with PROMETHEUS_MULTIPROC_DIR the live processes' slots add up and the lag
# is the worst one's (a dead runner's values go once `runworkflows` exits and marks it dead).
RUNNER_SLOTS_USED = Gauge(
    "workflows_runner_slots_used", "Runs the runner executes now.", multiprocess_mode="livesum"
)
RUNNER_SLOTS_FREE = Gauge(
    "workflows_runner_slots_free", "More runs the runner could take on now.", multiprocess_mode="livesum"
)
RUNNER_LOOP_LAG = Gauge(
    "workflows_runner_event_loop_lag_seconds",
    "How late the runner's event loop woke a timer at its last sample (a blocking step shows here).",
    multiprocess_mode="livemax",
)
RUNNER_CLOCK_OFFSET = Gauge(
    "workflows_runner_clock_offset_seconds",
    "How far the runner's host wall clock is ahead of the database's (negative: behind), last measured."
    " The runner decides on the database's clock; an offset says the host's time needs fixing.",
    multiprocess_mode="liveall",
)
DOCTOR_FINDINGS = Gauge(
    "workflows_doctor_findings",
    "What the runner's periodic doctor check found stuck, by kind (runs, slots or schedules; see"
    " `manage.py workflows doctor`). Every runner reads the same database: the highest is shown.",
    ["kind"],
    multiprocess_mode="livemax",
)


def doctor_findings(counts: dict[str, int]) -> None:
    """Set the doctor's gauge: `counts` names every kind checked (0 for a clean one)."""
    for kind, count in counts.items():
        DOCTOR_FINDINGS.labels(kind).set(count)


def multiprocess_dir() -> str | None:
    """The directory prometheus_client's multiprocess mode writes to, when it is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


def forget_this_process() -> None:
    """In multiprocess mode, drop this process's live gauges (its slots, its loop lag) from the
    sums: a runner calls it as it exits. Its counters and histograms stay, as they should."""
    directory = multiprocess_dir()
    if directory is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid(), directory)


class MetricsObserver(Observer):
    """Counts what the runner stored into the metrics above. Cheap and non-blocking: a few dict
    lookups and increments per commit."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()  # when a run ended (a commit carries no time of its own)
        self._steps: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        # (workflow, step label, outcome) -> its attempts counter and duration histogram: a
        # `labels()` lookup checks and locks each time (two per step, most of this observer's
        # cost); the labels are bounded (MAX_STEP_LABELS), so is this
        self._attempt_series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}

    def attached(self, *, clock: Clock) -> None:
        self.clock = clock  # run times are on the runner's clock (the database's): so are durations

    def step_label(self, workflow: str, name: str) -> str:
        """A step's label: its name with numeric segments as `#` (`enrich-3` -> `enrich-#`: one
        series for steps named per item), and past MAX_STEP_LABELS distinct labels of a
        workflow, OTHER_STEP, so names made of ids cannot grow the series without bound."""
        label = _NUMBER.sub("#", name)
        with self._lock:
            seen = self._steps.setdefault(workflow, set())
            if label in seen:
                return label
            if len(seen) >= MAX_STEP_LABELS:
                return OTHER_STEP
            seen.add(label)
        return label

    def _attempt_metrics(self, workflow: str, step: str, outcome: str) -> tuple[Counter, Histogram]:
        key = (workflow, step, outcome)
        series = self._attempt_series.get(key)
        if series is None:
            series = STEP_ATTEMPTS.labels(*key), STEP_DURATION.labels(*key)
            self._attempt_series[key] = series
        return series

    def execution_started(self, run: RunRecord, *, owner: str, claimed_at: dt.datetime) -> None:
        if run.fresh:
            RUNS_STARTED.labels(run.workflow).inc()
        if run.due_at is not None:
            late = (claimed_at - run.due_at).total_seconds()
            SCHEDULE_TO_START.labels(run.workflow).observe(max(0.0, late))

    def committed(self, run: RunRecord, commit: Commit) -> None:
        workflow = run.workflow
        for write, attempt in commit.entries:
            if attempt is None:  # a marker, a wait, a pruned scope: no attempt ran
                continue
            step = self.step_label(workflow, write.name)
            attempts, duration = self._attempt_metrics(workflow, step, attempt.outcome)
            attempts.inc()
            duration.observe(max(0.0, (attempt.finished_at - attempt.started_at).total_seconds()))
            if attempt.delay is not None:
                STEP_RETRIES.labels(workflow, step).inc()
            if write.meta:
                for kind, count in tokens_of(write.meta.get("usage")).items():
                    MODEL_TOKENS.labels(workflow, step, kind).inc(count)
        for message in commit.messages:
            MESSAGES_SENT.labels(workflow, message.queue).inc()
        transition = commit.transition
        if transition is not None and transition.status in TERMINAL:
            RUNS_FINISHED.labels(workflow, transition.status).inc()
            if run.created_at is not None:
                seconds = (self.clock.now() - run.created_at).total_seconds()
                RUN_DURATION.labels(workflow, transition.status).observe(max(0.0, seconds))

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        if status == "lost":
            LEASES_LOST.labels(run.workflow).inc()

    def runner_sampled(self, sample: RunnerSample) -> None:
        RUNNER_SLOTS_USED.set(sample.slots_used)
        RUNNER_SLOTS_FREE.set(sample.slots_free)
        RUNNER_LOOP_LAG.set(sample.loop_lag)
        if sample.clock_offset is not None:
            RUNNER_CLOCK_OFFSET.set(sample.clock_offset)


def observer() -> MetricsObserver:
    """The factory WORKFLOWS["OBSERVERS"] names by default."""
    return MetricsObserver()
