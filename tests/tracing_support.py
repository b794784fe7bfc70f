"""Tracing in tests with a TracerProvider of the test's own: the global provider is never set
(a process sets it once), so no other test is traced."""

from __future__ import annotations

from collections.abc import Iterator

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from workflows.telemetry.tracing import TracingObserver, use_tracer_provider


class Traced:
    """A provider of the test's own, its exporter, and an observer tracing with it."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.observer = TracingObserver(tracer_provider=self.provider)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]


def tracing() -> Iterator[Traced]:
    """The body of a `traced` fixture: starts and sends trace with the test's provider too."""
    traced = Traced()
    with use_tracer_provider(traced.provider):
        yield traced
    traced.provider.shutdown()
