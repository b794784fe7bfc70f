"""The example job, traced end to end against the demo services: the submission's producer
spans, the executions continuing the trace, one span per step attempt (a 429 retry as two), and
the model steps' GenAI attributes. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobs.submission import job_submit
from jobs.workflows import registry
from tests.tracing_support import Traced, tracing
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = pytest.mark.django_db


@pytest.fixture
def traced():
    yield from tracing()


def test_one_job_is_one_trace__producer__executions__step_attempts(demo, traced: Traced):
    demo.script("extract", ["429"])
    # The request's span, as Django's instrumentation would open it around POST /jobs.
    with traced.provider.get_tracer("test").start_as_current_span("POST /jobs", kind=SpanKind.SERVER):
        job_id = job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id
    run_until_idle(registry, observers=[traced.observer])

    [request] = traced.named("POST ")
    [start] = traced.named("start ")
    assert (start.name, start.kind) == ("start aiJob", SpanKind.PRODUCER)
    assert not traced.named("send ")  # the start message is stored with the run, in its span
    assert start.parent.span_id == request.context.span_id
    assert {s.context.trace_id for s in traced.spans()} == {request.context.trace_id}  # one trace
    executions = sorted(traced.named("workflow "), key=lambda s: s.start_time)
    assert executions and all(e.parent.span_id == start.context.span_id for e in executions)
    assert executions[-1].attributes["workflows.execution.outcome"] == "completed"
    assert executions[0].attributes["workflows.run.key"] == f'["{job_id}"]'
    # The execution that took the "start" message links the span that produced it: the start's.
    assert [link.context.span_id for e in executions for link in e.links] == [start.context.span_id]

    execution_ids = {e.context.span_id for e in executions}
    attempts = sorted(
        (
            s.attributes["workflows.step.name"],
            s.attributes["workflows.step.attempt"],
            s.attributes["workflows.step.outcome"],
        )
        for s in traced.named("step ")
        if s.parent.span_id in execution_ids
    )
    assert attempts == [
        ("enrich-0", 1, "ok"), ("enrich-1", 1, "ok"), ("enrich-2", 1, "ok"),
        ("extract", 1, "error"), ("extract", 2, "ok"),
        ("publish", 1, "ok"), ("record-publication", 1, "ok"), ("summarize", 1, "ok"),
    ]  # fmt: skip
    assert len(traced.named("step ")) == len(attempts)  # no replayed entry has a span

    by_attempt = {(s.name, s.attributes["workflows.step.attempt"]): s for s in traced.named("step ")}
    failed = by_attempt[("step extract", 1)]
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["error.type"]
    assert failed.attributes["workflows.step.retry_delay"] == 4.0
    for name in ("step extract", "step summarize"):
        span = by_attempt[(name, 2 if name == "step extract" else 1)]
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["gen_ai.request.model"] == span.attributes["gen_ai.response.model"]
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        assert span.attributes["gen_ai.usage.output_tokens"] > 0
    assert not any(k.startswith("gen_ai.") for k in by_attempt[("step publish", 1)].attributes)
