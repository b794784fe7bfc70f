"""What a workflow declares for the pages that show its runs, read through the configured registry: the state keys
that label its runs (`workflow(..., labels=...)`, with `live_labels=...` for values the state does
not hold yet), its decision queues (`queue(...,
choices=..., note=..., shows=...)`) and the external calls of its steps (`calls_out=...`). The inspector knows workflows only through these: a run whose workflow is not in
this server's registries shows without labels and without decision buttons.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import conf
from ..core.exceptions import WorkflowError
from ..engine.definition import QueueSpec, Workflow
from ..masking import mask

LABEL_CHARS = 120  # a label is a glance, not the value: longer text is cut
LABELS_ATTR = "labels_now"  # where `label_runs` leaves a run's labels for `run_labels`

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Label:
    key: str  # the state key
    text: str  # its value as shown, masked


@dataclass(frozen=True)
class RunLabels:
    """A run's name in the inspector: `title` (the first label's value) and the others beside it."""

    title: str | None = None
    details: tuple[Label, ...] = ()

    def __bool__(self) -> bool:
        return self.title is not None or bool(self.details)

    def as_json(self) -> dict[str, Any]:
        return {"title": self.title, "details": [{"key": d.key, "text": d.text} for d in self.details]}


NO_LABELS = RunLabels()

RUN_AGAIN_KINDS = ("step", "try")  # the entries whose function runs again when replayed


@dataclass(frozen=True)
class RunsAgain:
    """A step a replay runs again, and the external call it declares (None: none declared)."""

    step: str
    call: str | None

    @property
    def sentence(self) -> str:
        if self.call is None:
            return f"{self.step} runs again (it declares no external call)."
        return f"{self.step} will {self.call} again, under a new idempotency key."


def runs_again(workflow: Workflow | None, entries: list[Any]) -> list[RunsAgain]:
    """The steps among `entries` (those a replay supersedes) that run again, each with the call it
    declares on `workflow(..., calls_out=...)`; declared calls first, in history order."""
    steps = [e for e in entries if e.kind in RUN_AGAIN_KINDS]
    found = [RunsAgain(e.name, workflow.call_of(e.name) if workflow else None) for e in steps]
    return [r for r in found if r.call] + [r for r in found if not r.call]


def definition(workflow: str, version: str) -> Workflow | None:
    """The definition a run of `workflow` at `version` executes, or None when no registry of this
    server names it (the page still shows the run, undecorated)."""
    try:
        return conf.registry().for_run(workflow, version)
    except WorkflowError:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def labels_of(definition: Workflow | None, state: Any) -> RunLabels:
    """The declared labels' values in `state`, masked like everything a run recorded; a key the
    state lacks (or holds null) is left out."""
    if definition is None or not definition.labels or not isinstance(state, dict):
        return NO_LABELS
    shown = mask({key: state.get(key) for key in definition.labels})
    first, *others = definition.labels
    details = tuple(Label(key, text) for key in others if (text := _text(shown[key])) is not None)
    return RunLabels(title=_text(shown[first]), details=details)


def run_labels(run: Any) -> RunLabels:
    """`labels_of` for a Run row, with its workflow's `live_labels` (`runs_labels` of one run); the
    labels `label_runs` attached to it, when it did."""
    attached = getattr(run, LABELS_ATTR, None)
    return attached if attached is not None else runs_labels([run])[str(run.id)]


def runs_labels(runs: Sequence[Any]) -> dict[str, RunLabels]:
    """Run id -> its labels, for a page of runs: each workflow's `live_labels` is called once with
    its runs on the page (so a list costs the hook's queries once, not once per run), its values
    shown over the state's. A hook that raises is logged, and the state's values are shown."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for run in runs:
        groups.setdefault((run.workflow, run.version), []).append(run)
    found: dict[str, RunLabels] = {}
    for (workflow, version), group in groups.items():
        declared = definition(workflow, version)
        live = _live_labels(declared, group)
        for run in group:
            state = run.state if isinstance(run.state, dict) else {}
            found[str(run.id)] = labels_of(declared, {**state, **live.get(str(run.id), {})})
    return found


def label_runs(runs: Sequence[Any]) -> None:
    """Attach `runs_labels` to each run of a page, for the pages that ask `run_labels` row by row."""
    labels = runs_labels(runs)
    for run in runs:
        setattr(run, LABELS_ATTR, labels[str(run.id)])


def _live_labels(declared: Workflow | None, runs: list[Any]) -> Mapping[str, Mapping[str, Any]]:
    if declared is None or declared.live_labels is None or not declared.labels:
        return {}
    try:
        return {str(k): v for k, v in declared.live_labels(runs).items() if isinstance(v, Mapping)}
    except Exception:  # a page shows the state's labels rather than fail on the app's hook
        logger.exception("live_labels of %s failed; showing the state's labels", runs[0].workflow)
        return {}


def decision_queues(definition: Workflow | None) -> dict[str, list[str]]:
    """Queue name -> its choices' labels, for each decision queue the definition declares."""
    if definition is None:
        return {}
    return {name: list(spec.choices) for name, spec in definition.queues.items() if spec.choices}


def decision_spec(definition: Workflow | None, queue: str) -> QueueSpec | None:
    """The declaration of `queue` when it is a decision queue of the definition, else None."""
    spec = definition.queues.get(queue) if definition is not None else None
    return spec if spec is not None and spec.choices else None


def reviewed(definition: Workflow | None, queue: str, state: Any) -> list[tuple[str, Any]]:
    """What the operator deciding on `queue` reviews first: the state keys its `shows` names,
    masked, in order (a missing key shows as None)."""
    spec = decision_spec(definition, queue)
    if spec is None or not spec.shows:
        return []
    state = state if isinstance(state, dict) else {}
    shown = mask({key: state.get(key) for key in spec.shows})
    return [(key, shown[key]) for key in spec.shows]


def choice_body(definition: Workflow | None, queue: str, choice: str, operator: str) -> Any:
    """The body the choice prefills for `operator`; LookupError when it is not declared."""
    spec = definition.queues.get(queue) if definition is not None else None
    if spec is None or choice not in spec.choices:
        raise LookupError(f"“{choice}” is not a declared choice of the queue “{queue}”")
    return spec.choice_body(choice, operator=operator)
