"""What users declare: workflows, their queues, events and actions, and the registry naming them.

Pure Python: importing this never touches Django's app registry or the database.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.clock import Clock
from ..core.exceptions import InvalidMessage, UnknownAction, UnknownEvent, UnknownQueue, UnknownWorkflow
from ..core.jsonvalue import normalize
from ..storage.base import Store
from .client import WorkflowClient


@dataclass(frozen=True)
class QueueSpec:
    """A named inbox of a workflow; `schema` (a pydantic model) validates message bodies."""

    schema: Any = None

    def validate(self, target: str, body: Any) -> Any:
        return _validate(self.schema, target, body)


@dataclass(frozen=True)
class EventSpec:
    """An event a workflow broadcasts; `schema` (a pydantic model) validates payloads."""

    schema: Any = None

    def validate(self, target: str, payload: Any) -> Any:
        return _validate(self.schema, target, payload)


def _validate(schema: Any, target: str, value: Any) -> Any:
    if schema is None:
        return normalize(value, target)
    try:
        model = schema.model_validate(value)
    except Exception as exc:  # pydantic.ValidationError, or a schema's own error
        detail = exc.errors(include_url=False) if hasattr(exc, "errors") else str(exc)
        raise InvalidMessage(target, detail) from None
    return normalize(model.model_dump(mode="json"), target)


def queue(schema: Any = None) -> QueueSpec:
    return QueueSpec(schema)


def event(schema: Any = None) -> EventSpec:
    return EventSpec(schema)


@dataclass(frozen=True)
class Workflow:
    """A workflow definition: the body plus everything a run of it exposes."""

    run: Callable[[Any], Awaitable[Any]]
    state: Callable[[], dict[str, Any]] | None = None
    queues: Mapping[str, QueueSpec] = field(default_factory=dict)
    events: Mapping[str, EventSpec] = field(default_factory=dict)
    actions: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    on_error: Callable[[Any, Any], Any] | None = None
    version: str = ""

    def initial_state(self) -> dict[str, Any]:
        state = self.state() if self.state else {}
        if not isinstance(state, dict):
            raise InvalidMessage("initial state", "state() must return a dict")
        return normalize(state, "initial state")

    def queue_spec(self, name: str, workflow_name: str) -> QueueSpec:
        try:
            return self.queues[name]
        except KeyError:
            raise UnknownQueue(workflow_name, name) from None

    def event_spec(self, name: str, workflow_name: str) -> EventSpec:
        try:
            return self.events[name]
        except KeyError:
            raise UnknownEvent(workflow_name, name) from None

    def action_fn(self, name: str, workflow_name: str) -> Callable[[Any], Any]:
        try:
            return self.actions[name]
        except KeyError:
            raise UnknownAction(workflow_name, name) from None


def _code_version(fn: Callable[..., Any]) -> str:
    """A short fingerprint of the body's source: each run records the code it started on."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = getattr(fn, "__qualname__", repr(fn))
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def workflow(
    run: Callable[[Any], Awaitable[Any]],
    *,
    state: Callable[[], dict[str, Any]] | None = None,
    queues: Mapping[str, QueueSpec] | None = None,
    events: Mapping[str, EventSpec] | None = None,
    actions: Mapping[str, Callable[[Any], Any]] | None = None,
    on_error: Callable[[Any, Any], Any] | None = None,
    version: str | None = None,
) -> Workflow:
    """Declare a workflow. `version` defaults to a fingerprint of `run`'s source."""
    if not inspect.iscoroutinefunction(run):
        raise TypeError("a workflow's run must be an `async def` function")
    if on_error is not None and _is_async(on_error):
        raise TypeError("on_error must be a plain function (it is quick bookkeeping), not `async def`")
    return Workflow(
        run=run,
        state=state,
        queues=dict(queues or {}),
        events=dict(events or {}),
        actions=dict(actions or {}),
        on_error=on_error,
        version=version or _code_version(run),
    )


class Registry:
    """Names workflows. The runner serves every registry listed in `WORKFLOWS_REGISTRIES`.

    A name maps to its latest definition, optionally followed by older ones still serving runs
    that started on them: `setup(use={"aiJob": [ai_job_v3, ai_job_v2]})`. A run executes the
    definition of the version it recorded when that one is still registered, else the latest
    (whose `ctx.get_version` gates then keep it on its branch).
    """

    def __init__(self, workflows: Mapping[str, Workflow | list[Workflow] | tuple[Workflow, ...]]) -> None:
        self._versions: dict[str, list[Workflow]] = {}
        for name, given in workflows.items():
            definitions = list(given) if isinstance(given, list | tuple) else [given]
            if not definitions:
                raise TypeError(f"{name!r} has no definition")
            for wf in definitions:
                if not isinstance(wf, Workflow):
                    raise TypeError(f"{name!r} is not a Workflow (build it with workflows.workflow(...))")
            versions = [wf.version for wf in definitions]
            if len(set(versions)) != len(versions):
                raise ValueError(f"{name!r} registers version {versions} more than once")
            self._versions[name] = definitions
        self.workflows: dict[str, Workflow] = {name: defs[0] for name, defs in self._versions.items()}

    def get(self, name: str) -> Workflow:
        """The latest definition of `name` (what new runs start on)."""
        try:
            return self.workflows[name]
        except KeyError:
            raise UnknownWorkflow(name) from None

    def for_run(self, name: str, version: str) -> Workflow:
        """The definition a run of `version` executes: that version when registered, else the latest."""
        latest = self.get(name)
        return next((wf for wf in self._versions[name] if wf.version == version), latest)

    def __contains__(self, name: object) -> bool:
        return name in self.workflows

    def names(self) -> list[str]:
        return sorted(self.workflows)

    def merged(self, other: Registry) -> Registry:
        clash = set(self._versions) & set(other._versions)
        if clash:
            raise ValueError(f"workflow names registered twice: {sorted(clash)}")
        return Registry({**self._versions, **other._versions})

    def client(self, name: str, *, store: Store | None = None, clock: Clock | None = None) -> WorkflowClient:
        """A client for runs of `name`, over `store` (default: the store the app configured)."""
        self.get(name)
        return WorkflowClient(self, name, store=store, clock=clock)


def setup(use: Mapping[str, Workflow | list[Workflow] | tuple[Workflow, ...]]) -> Registry:
    """Name workflows: `{"aiJob": ai_job}`, or `{"aiJob": [latest, older, ...]}`."""
    return Registry(use)
