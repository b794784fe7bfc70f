"""Traces, metrics and logs of durable runs, built on the runner's observers
(`workflows.engine.observers`): they report what was stored, so a replay never reports twice.

This package is the only one of `workflows` that imports OpenTelemetry; it imports no Django, so
the engine's client may use it to start producer spans."""
