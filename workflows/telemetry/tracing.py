"""OpenTelemetry traces of durable runs: the API only; which SDK and exporter is the user's choice.

A trace follows a run across processes and time:

- the caller that starts a run, or sends it a message, opens a PRODUCER span (`producer_span`) and
  its W3C context (`traceparent`, `tracestate`) is stored with the new run or the message;
- each execution of the run is one span (`workflow <name>`), a child of the context stored with
  the run, linked to the contexts of the messages it consumed;
- each step attempt is a child of its execution's span, with the attempt's real start and end;
  waits are events on the execution's span; model calls carry the GenAI attributes their step
  recorded in `step.meta` (`gen_ai_attributes`).

Spans are made from what the runner's observers are told was stored (`TracingObserver`), so a
replayed entry makes none, and an attempt cut off by a crash makes none either (the next
execution's attempt does). With no SDK configured the API is a no-op: `inject` writes nothing and
NULL is stored, so tracing off costs neither a column's bytes nor a query.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from ..core.records import AttemptWrite, Commit, EntryKind, EntryStatus, EntryWrite, Outcome, RunRecord
from ..engine.observers import Observer

INSTRUMENTATION = "workflows"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_global_tracer: Tracer = trace.get_tracer(INSTRUMENTATION)  # follows the global provider once set
_provider_override: TracerProvider | None = None


def get_tracer(provider: TracerProvider | None = None) -> Tracer:
    """The tracer of `provider`, else of `use_tracer_provider`'s, else of the global provider."""
    chosen = provider or _provider_override
    return _global_tracer if chosen is None else chosen.get_tracer(INSTRUMENTATION)


@contextlib.contextmanager
def use_tracer_provider(provider: TracerProvider | None) -> Iterator[None]:
    """Trace with `provider` instead of the global one while the block runs (tests: the global
    provider can be set once per process)."""
    global _provider_override
    previous, _provider_override = _provider_override, provider
    try:
        yield
    finally:
        _provider_override = previous


def ns(when: dt.datetime) -> int:
    """A datetime as OpenTelemetry's nanoseconds since the epoch (naive means UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - _EPOCH) // dt.timedelta(microseconds=1) * 1000


def carrier_context(carrier: Mapping[str, str] | None) -> Context:
    """The context a stored carrier names; an empty (root) context for none."""
    return propagate.extract(carrier) if carrier else Context()


def trace_id(carrier: Mapping[str, Any] | None) -> str | None:
    """The 32-hex trace id in a stored carrier (what the inspector shows), or None."""
    if not isinstance(carrier, Mapping):
        return None
    span = trace.get_current_span(carrier_context({str(k): str(v) for k, v in carrier.items()}))
    context = span.get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None


# --- producers: whoever starts a run or sends it a message ----------------------------------------


@dataclass
class Producer:
    """An open producer span and the carrier to store with what it produces (None: not traced)."""

    span: Span
    carrier: dict[str, str] | None

    def produced(
        self, *, run_id: str | None = None, message_id: int | None = None, created: bool | None = None
    ) -> None:
        """Name what was produced: the run (and whether this start created it), the message."""
        if not self.span.is_recording():
            return
        for attribute, value in (
            ("workflows.run.id", run_id),
            ("workflows.message.id", message_id),
            ("workflows.run.created", created),
        ):
            if value is not None:
                self.span.set_attribute(attribute, value)


@contextlib.contextmanager
def producer_span(
    operation: str, workflow: str, *, queue: str | None = None, run_id: str | None = None
) -> Iterator[Producer]:
    """A PRODUCER span around a start (`operation="start"`) or a send, current while the block
    runs (so the store's queries nest under it when they are traced); its carrier goes into the
    same insert as the run or the message. An exception ends it with status ERROR and its
    `error.type` (not its message, which may quote the refused body)."""
    if _provider_override is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # No SDK: the span would record nothing and carry the caller's context, if any, as is;
        # carry it without opening one (a start's hot path, in every web request that starts one).
        carrier: dict[str, str] = {}
        if trace.get_current_span().get_span_context().is_valid:
            propagate.inject(carrier)
        yield Producer(trace.INVALID_SPAN, carrier or None)
        return
    name = f"{operation} {workflow}" + (f".{queue}" if queue else "")
    attrs: dict[str, Any] = {"workflows.operation": operation, "workflows.workflow.name": workflow}
    if queue is not None:
        attrs["workflows.queue"] = queue
    if run_id is not None:
        attrs["workflows.run.id"] = run_id
    with get_tracer().start_as_current_span(
        name, kind=SpanKind.PRODUCER, attributes=attrs, record_exception=False, set_status_on_exception=False
    ) as span:
        carrier = {}
        if span.get_span_context().is_valid:
            propagate.inject(carrier)
        try:
            yield Producer(span, carrier or None)
        except BaseException as exc:
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise


# --- GenAI attributes from a step's meta ----------------------------------------------------------


def gen_ai_attributes(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """The GenAI semantic-convention attributes a model step recorded in `step.meta`:

        step.meta["gen_ai"] = {"operation": "chat", "provider": "openai",
                               "request_model": "gpt-4o-mini", "response_model": "gpt-4o-mini-2024-07-18",
                               "input_tokens": 812, "output_tokens": 96}   # every key optional
        step.meta["usage"] = {"prompt_tokens": 812, "completion_tokens": 96}  # OpenAI's, or
                             {"input_tokens": 812, "output_tokens": 96}        # these names

    Token counts come from `gen_ai`, else from `usage`. Nothing when neither is there."""
    if not isinstance(meta, Mapping):
        return {}
    gen_ai = _mapping(meta.get("gen_ai"))
    usage = _mapping(meta.get("usage"))
    if not gen_ai and not usage:
        return {}
    attrs: dict[str, Any] = {"gen_ai.operation.name": _text(gen_ai.get("operation")) or "chat"}
    provider = _text(gen_ai.get("provider"))
    if provider:
        attrs["gen_ai.provider.name"] = attrs["gen_ai.system"] = provider
    for key, attribute in (
        ("request_model", "gen_ai.request.model"),
        ("response_model", "gen_ai.response.model"),
    ):
        value = _text(gen_ai.get(key))
        if value:
            attrs[attribute] = value
    for names, attribute in (
        (("input_tokens", "prompt_tokens"), "gen_ai.usage.input_tokens"),
        (("output_tokens", "completion_tokens"), "gen_ai.usage.output_tokens"),
    ):
        count = _first_count(names, gen_ai, usage)
        if count is not None:
            attrs[attribute] = count
    return attrs


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first_count(names: tuple[str, ...], *sources: Mapping[str, Any]) -> int | None:
    for source in sources:
        for name in names:
            value = source.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


# --- the runner's side: executions, attempts, waits -----------------------------------------------


@dataclass
class _Open:
    span: Span
    last_end: int = 0  # ns: the latest end of a child, so the execution never ends before one
    outcome: str = ""
    error_type: str | None = None


class TracingObserver(Observer):
    """One span per execution of a run, one per step attempt, waits as events: see the module.

    `tracer_provider`: the provider to trace with (tests); default the global one, set by the
    user's SDK setup (`opentelemetry-instrument`, or `trace.set_tracer_provider(...)`)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.tracer_provider = tracer_provider
        self._open: dict[str, _Open] = {}

    def _tracer(self) -> Tracer:
        return get_tracer(self.tracer_provider)

    def execution_started(self, run: RunRecord, *, owner: str, claimed_at: dt.datetime) -> None:
        tracer = self._tracer()
        attributes: dict[str, Any] = {
            "workflows.workflow.name": run.workflow,
            "workflows.run.id": run.id,
            "workflows.run.key": json.dumps(run.key, ensure_ascii=False),
            "workflows.run.version": run.version,
            "workflows.run.epoch": run.epoch,
            "workflows.execution.fresh": run.fresh,
            "workflows.execution.taken_over": run.taken_over,
            "workflows.runner": owner,
        }
        due = run.wake_at or run.created_at
        if due is not None:
            attributes["workflows.execution.delay"] = max(0.0, (claimed_at - due).total_seconds())
        span = tracer.start_span(
            f"workflow {run.workflow}",
            context=carrier_context(run.trace_context),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            start_time=ns(claimed_at),
        )
        previous = self._open.pop(run.id, None)
        if previous is not None:  # never told it ended: do not leak it
            previous.span.end()
        self._open[run.id] = _Open(span=span, last_end=ns(claimed_at))

    def committed(self, run: RunRecord, commit: Commit) -> None:
        current = self._open.get(run.id)
        if current is None or not current.span.is_recording():
            return
        parent = trace.set_span_in_context(current.span)
        for write, attempt in commit.entries:
            if attempt is not None:
                self._attempt_span(parent, current, run, write, attempt)
            elif write.kind in (EntryKind.SLEEP, EntryKind.QUEUE):
                self._wait_event(current, write)
        transition = commit.transition
        if transition is not None:
            current.outcome = transition.status
            if transition.error:
                current.error_type = _error_type(transition.error)

    def _attempt_span(
        self, parent: Context, current: _Open, run: RunRecord, write: EntryWrite, attempt: AttemptWrite
    ) -> None:
        attributes: dict[str, Any] = {
            "workflows.workflow.name": run.workflow,
            "workflows.run.id": run.id,
            "workflows.step.name": write.name,
            "workflows.step.attempt": attempt.number,
            "workflows.step.outcome": attempt.outcome,
        }
        if write.scope:
            attributes["workflows.step.scope"] = write.scope
        if attempt.delay is not None:
            attributes["workflows.step.retry_delay"] = attempt.delay
        attributes.update(gen_ai_attributes(write.meta))
        error_type = _error_type(attempt.error) if attempt.outcome != Outcome.OK else None
        if error_type:
            attributes["error.type"] = error_type
        start, end = ns(attempt.started_at), ns(attempt.finished_at)
        span = self._tracer().start_span(
            f"step {write.name}", context=parent, attributes=attributes, start_time=start
        )
        if attempt.outcome != Outcome.OK:
            span.set_status(Status(StatusCode.ERROR, f"{attempt.outcome}: {error_type or 'error'}"))
        span.end(end_time=max(end, start))
        current.last_end = max(current.last_end, end)

    def _wait_event(self, current: _Open, write: EntryWrite) -> None:
        attributes: dict[str, Any] = {"workflows.wait.name": write.name, "workflows.wait.kind": write.kind}
        if write.scope:
            attributes["workflows.wait.scope"] = write.scope
        if write.status == EntryStatus.WAITING:
            if write.wake_at is not None:
                attributes["workflows.wait.until"] = write.wake_at.isoformat()
            current.span.add_event("wait", attributes)
            return
        if write.kind == EntryKind.QUEUE and write.status == EntryStatus.COMPLETED:
            attributes["workflows.wait.messages"] = len(write.consumes)
            current.span.add_event("wait done", attributes)
            for carrier in write.consumed_contexts:  # the senders' producer spans
                context = trace.get_current_span(carrier_context(carrier)).get_span_context()
                if context.is_valid:
                    current.span.add_link(context, {"workflows.link": "message"})

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        current = self._open.pop(run.id, None)
        if current is None:
            return
        span = current.span
        span.set_attribute("workflows.execution.outcome", status)
        if current.outcome:
            span.set_attribute("workflows.run.status", current.outcome)
        if wake_at is not None:
            span.set_attribute("workflows.run.wake_at", wake_at.isoformat())
        if status in ("failed", "abandoned"):
            if current.error_type:
                span.set_attribute("error.type", current.error_type)
            span.set_status(Status(StatusCode.ERROR, status))
        span.end(end_time=max(time.time_ns(), current.last_end))


def _error_type(error: Mapping[str, Any] | None) -> str | None:
    """An error's class name: never its message (it may hold a secret)."""
    name = (error or {}).get("name")
    return name if isinstance(name, str) and name else None
