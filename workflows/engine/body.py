"""The run as its body replays it, whoever drives it: the definition, the history and the state, the
replay decision, the rollbacks of the steps passed, and what the body's entries ask of the workflow's
declarations (its queues, events, limiters, children). An `Execution` adds the store and the commit
pipeline; the replayer's `DryRun` adds nothing that writes. Both are `core.recorder.BodyRecorder`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.clock import Clock
from ..core.exceptions import BadInput, DuplicateEntryName, HistoryDiverged
from ..core.jsonvalue import copy_json
from ..core.keys import validate_key
from ..core.limits import Limiter
from ..core.records import EntryRecord, OutgoingMessage, RunRecord
from ..core.replay import Decision, History
from .definition import Workflow
from .registry import Registry
from .steps import SyncStepRunner, run_sync_step


class RunBody:
    def __init__(
        self,
        *,
        run: RunRecord,
        definition: Workflow,
        registry: Registry,
        history: list[EntryRecord],
        clock: Clock,
        sync_step_runner: SyncStepRunner = run_sync_step,
    ) -> None:
        self.run = run
        self.definition = definition
        self.registry = registry
        self.history = History(run.id, history)
        self.clock = clock
        self.state: dict[str, Any] = copy_json(run.state)
        self.sync_step_runner = sync_step_runner
        self.fatal: BaseException | None = None  # a diverged history: the run fails with it
        self.has_checkpoint = False
        self.compensating = False
        self._rollbacks: list[tuple[str, Callable[..., Any], Any]] = []  # (step, rollback fn, output)

    def decide(self, scope: str, name: str, kind: str, input: Any = None) -> Decision:
        """The history's replay decision for the next entry of `scope`; a divergence is kept as
        fatal: the run fails with it, whatever the body does with the exception."""
        self.raise_if_fatal()
        try:
            return self.history.enter(scope, name, kind, now=self.clock.now(), input=input)
        except (HistoryDiverged, DuplicateEntryName) as exc:
            self.fatal = exc
            raise

    def raise_if_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal

    def check_lease(self) -> None:
        """Nothing to check unless a runner holds the run (`Execution`)."""

    def add_rollback(self, name: str, fn: Callable[..., Any], output: Any) -> None:
        """A completed step's compensation, run if the run fails for good."""
        self._rollbacks.append((name, fn, output))

    def compensations(self) -> list[str]:
        """The steps whose rollbacks a cancel or a failure would run now, in the order they run."""
        return [name for name, _fn, _output in reversed(self._rollbacks)]

    # --- what the entries ask of the declarations ------------------------------------------------

    @property
    def on_error(self) -> Callable[[Any, Any], Any] | None:
        return self.definition.on_error

    def check_queue(self, queue: str) -> None:
        self.definition.queue_spec(queue, self.run.workflow)

    def limiter(self, name: str) -> Limiter:
        return self.registry.limiter(name)

    def target(self, workflow: str) -> Workflow:
        return self.registry.get(workflow)

    def validate_event(self, event: str, payload: Any) -> Any:
        spec = self.definition.event_spec(event, self.run.workflow)
        return spec.validate(f"event {self.run.workflow}.{event}", payload)

    def outgoing(self, queue: str, body: Any, workflow: str | None, key: list[str] | None) -> OutgoingMessage:
        """A step's message. It carries the trace context this run was started in (if any), so
        the run it wakes or creates continues that trace."""
        if workflow is None and key is None:
            spec = self.definition.queue_spec(queue, self.run.workflow)
            return OutgoingMessage(
                queue=queue,
                body=spec.validate(f"queue {self.run.workflow}.{queue}", body),
                run_id=self.run.id,
                trace_context=self.run.trace_context,
            )
        if workflow is None or key is None:
            raise BadInput("send to another run needs both workflow= and key=")
        target = self.registry.get(workflow)
        key = validate_key(key)
        spec = target.queue_spec(queue, workflow)
        return OutgoingMessage(
            queue=queue,
            body=spec.validate(f"queue {workflow}.{queue}", body),
            workflow=workflow,
            key=key,
            version=target.version,
            initial_state=target.initial_state(),
            trace_context=self.run.trace_context,
            concurrency_group=target.group(workflow, key),
        )
