"""What users declare: workflows, their queues, events and actions (`engine.registry` names them).

Pure Python: importing this never touches Django's app registry or the database.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.concurrency import Concurrency
from ..core.exceptions import InvalidMessage, NotRecordable, UnknownAction, UnknownEvent, UnknownQueue
from ..core.jsonvalue import normalize
from ..core.retry import check_on_exhausted

OPERATOR = "$operator"
"""In a choice's body template, a string value equal to this (at any depth) stands for the user
name of the operator who picks the choice: who decided is recorded in the message itself."""


@dataclass(frozen=True)
class QueueSpec:
    """A named inbox of a workflow; `schema` (a pydantic model) validates message bodies.

    `choices` (button label -> message body template) makes it a decision queue: the operator
    dashboard lists runs waiting on it, and the inspector's decision form offers one button per
    choice; the body sent is `choice_body(label, operator=...)`, the signed-in operator standing
    wherever the template says `OPERATOR`. `note` names the body key the form's free-text note
    goes to (none: the form asks for no note); `shows` names the state keys the operator reviews
    before deciding (e.g. the draft to approve), shown above the buttons. The schema validates
    what is sent.
    """

    schema: Any = None
    choices: Mapping[str, Any] = field(default_factory=dict, hash=False)
    note: str | None = None
    shows: Sequence[str] = ()  # kept as a tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", _checked_choices(self.choices))
        object.__setattr__(self, "shows", _checked_keys("shows", self.shows))
        if self.note is not None and (not isinstance(self.note, str) or not self.note.strip()):
            raise TypeError(f"a decision's note must name a body key (a non-empty string), not {self.note!r}")
        if (self.note is not None or self.shows) and not self.choices:
            raise ValueError("note= and shows= describe a decision: declare its choices= too")

    def validate(self, target: str, body: Any) -> Any:
        return _validate(self.schema, target, body)

    def choice_body(self, label: str, *, operator: str) -> Any:
        """The body choice `label` prefills: its template with each `OPERATOR` value replaced by
        `operator`. KeyError when `label` is not one of the choices."""
        return _fill_operator(self.choices[label], operator)


def _checked_choices(choices: Any) -> dict[str, Any]:
    """Refuse a malformed `choices` when the workflow is defined, not when an operator clicks."""
    if choices is None:
        return {}
    if not isinstance(choices, Mapping):
        raise TypeError(
            "queue choices must map a button label to a message body template, "
            f"e.g. {{'Approve': {{'decision': 'approve'}}}}; got {type(choices).__name__}"
        )
    checked = {}
    for label, body in choices.items():
        if not isinstance(label, str):
            raise TypeError(f"a queue choice's label must be a string, not {type(label).__name__}: {label!r}")
        if not label.strip():
            raise ValueError("a queue choice's label must not be empty")
        try:
            checked[label] = normalize(body, f"the body of choice {label!r}")
        except NotRecordable as exc:
            raise TypeError(str(exc)) from None
    return checked


def _checked_keys(what: str, keys: Any) -> tuple[str, ...]:
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise TypeError(f"{what} must be a sequence of state keys, e.g. ('title', 'summary'); got {keys!r}")
    for key in keys:
        if not isinstance(key, str) or not key:
            raise TypeError(f"{what} must name state keys (non-empty strings), not {key!r}")
    return tuple(keys)


def _fill_operator(template: Any, operator: str) -> Any:
    if template == OPERATOR:
        return operator
    if isinstance(template, dict):
        return {k: _fill_operator(v, operator) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill_operator(v, operator) for v in template]
    return template


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


def queue(
    schema: Any = None,
    *,
    choices: Mapping[str, Any] | None = None,
    note: str | None = None,
    shows: Sequence[str] = (),
) -> QueueSpec:
    """A queue; with `choices` a decision queue, e.g. `queue(Approval, choices={"Approve":
    {"decision": "approve", "by": OPERATOR}, "Reject": {"decision": "reject", "by": OPERATOR}},
    note="note", shows=("summary",))` (see QueueSpec). Raises TypeError/ValueError for a
    non-string or empty label, a non-JSON body, or a note or shows without choices.
    """
    return QueueSpec(
        schema,
        choices={} if choices is None else choices,
        note=note,
        shows=shows,
    )


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
    # Called when an operator's replay or retry now of a run is accepted, with the repair's
    # transaction: `on_repair(c, repair)` may write `c.state` and `c.broadcast(...)`.
    on_repair: Callable[[Any, Any], Any] | None = None
    version: str = ""
    labels: tuple[str, ...] = ()  # state keys naming a run in the inspector: title first
    # `live_labels(runs)` -> {run id: {label key: value}}: label values read from more than the state
    # (e.g. the step running now), for a page of runs at once (one call per page, not per run).
    live_labels: Callable[[Sequence[Any]], Mapping[str, Mapping[str, Any]]] | None = None
    on_exhausted: str = "fail"  # a step out of retries fails the run, or "pause"s it (ON_EXHAUSTED)
    # `Concurrency(max=2, key=lambda run: run.key[0])`: at most 2 runs of one group (here, per first
    # key part) execute at once across every runner; the others wait, holding nothing, in claim order.
    concurrency: Concurrency | None = None
    # Step name (or fnmatch pattern, e.g. "enrich-*") -> the external call the step makes, as a
    # verb phrase ("post the brief to the CMS"): the replay confirmation says which calls run again.
    calls_out: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _checked_labels(self.labels))
        object.__setattr__(self, "calls_out", _checked_calls(self.calls_out))
        if self.concurrency is not None and not isinstance(self.concurrency, Concurrency):
            raise TypeError(
                f"concurrency= takes Concurrency(max=..., key=...), not {type(self.concurrency).__name__}"
            )

    def group(self, name: str, key: Sequence[str]) -> str | None:
        """The concurrency group a new run of `key` joins (None: no limit); BadInput when the
        key function fails, before anything is written."""
        return None if self.concurrency is None else self.concurrency.group(name, key)

    def call_of(self, step: str) -> str | None:
        """The external call step `step` declares (`calls_out`): its exact name first, then the
        first pattern it matches; None when it declares none."""
        if step in self.calls_out:
            return self.calls_out[step]
        return next(
            (call for pattern, call in self.calls_out.items() if fnmatch.fnmatchcase(step, pattern)), None
        )

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


def _checked_calls(calls: Any) -> dict[str, str]:
    if calls is None:
        return {}
    if not isinstance(calls, Mapping):
        raise TypeError(
            "calls_out must map a step name (or pattern) to the call it makes, e.g. "
            f"{{'publish': 'post the brief to the CMS'}}; got {type(calls).__name__}"
        )
    for step, call in calls.items():
        if not isinstance(step, str) or not step.strip():
            raise TypeError(f"calls_out must name steps (non-empty strings), not {step!r}")
        if not isinstance(call, str) or not call.strip():
            raise TypeError(f"calls_out[{step!r}] must say what the step calls (a non-empty string)")
    return dict(calls)


def _checked_labels(labels: Any) -> tuple[str, ...]:
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(f"labels must be a sequence of state keys, e.g. ('title', 'stage'); got {labels!r}")
    for key in labels:
        if not isinstance(key, str):
            raise TypeError(f"a label must name a state key (a string), not {type(key).__name__}: {key!r}")
        if not key:
            raise ValueError("a label must not be an empty string")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels {list(labels)} name a state key more than once")
    return tuple(labels)


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
    on_repair: Callable[[Any, Any], Any] | None = None,
    version: str | None = None,
    labels: Sequence[str] = (),
    concurrency: Concurrency | None = None,
    calls_out: Mapping[str, str] | None = None,
    live_labels: Callable[[Sequence[Any]], Mapping[str, Mapping[str, Any]]] | None = None,
    on_exhausted: str = "fail",
) -> Workflow:
    """Declare a workflow. `version` defaults to a fingerprint of `run`'s source. `labels` are the
    state keys whose values name a run in the inspector and on the dashboard: the first is its
    title, the others show beside it (e.g. `("title", "stage")`). `on_repair(c, repair)` is called
    when an operator's replay or retry now is accepted (`repair`: a
    `workflows.core.repair_rules.Repair`); what it writes to `c.state` and broadcasts commits with
    the repair, so the state tells the truth from then on (e.g. clears an old error). `calls_out`
    maps step names (or fnmatch patterns such as `"enrich-*"`) to the external call each makes
    (`{"publish": "post the brief to the CMS"}`): the inspector's replay confirmation lists the
    calls that will run again. `live_labels(runs)` gives label values the state does not hold yet
    (e.g. the stage of the step running now, whose state commits with its result): called with a
    page of runs (their `id`, `status`, `state`), it returns `{run id: {label key: value}}`, shown
    over the state's values; one call per page, so it should read what it needs in one query.
    `on_exhausted="pause"`: a step out of retries pauses the run for an operator (replay, retry
    now, resume or cancel it) instead of failing it; a step's own `on_exhausted` overrides it."""
    check_on_exhausted(on_exhausted)
    if not inspect.iscoroutinefunction(run):
        raise TypeError("a workflow's run must be an `async def` function")
    if on_error is not None and _is_async(on_error):
        raise TypeError("on_error must be a plain function (it is quick bookkeeping), not `async def`")
    if on_repair is not None and _is_async(on_repair):
        raise TypeError("on_repair must be a plain function (it is quick bookkeeping), not `async def`")
    if live_labels is not None and _is_async(live_labels):
        raise TypeError("live_labels must be a plain function (pages call it), not `async def`")
    return Workflow(
        run=run,
        state=state,
        queues=dict(queues or {}),
        events=dict(events or {}),
        actions=dict(actions or {}),
        on_error=on_error,
        on_repair=on_repair,
        version=version or _code_version(run),
        labels=_checked_labels(labels),
        concurrency=concurrency,
        calls_out=_checked_calls(calls_out),
        live_labels=live_labels,
        on_exhausted=on_exhausted,
    )
