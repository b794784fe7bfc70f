"""The registry: names the declared workflows (with the older versions still serving runs), the
limiters their steps share and their cron schedules. `setup(use={...})` builds one.

Pure Python: importing this never touches Django's app registry or the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.clock import Clock
from ..core.exceptions import BadInput, UnknownWorkflow
from ..core.limits import Limiter
from ..storage.base import Store
from .client import WorkflowClient
from .definition import Workflow
from .schedules import Schedule, ScheduleError


class Registry:
    """Names workflows. The runner serves every registry listed in `settings.WORKFLOWS["REGISTRIES"]`.

    A name maps to its latest definition, optionally followed by older ones still serving runs
    that started on them: `setup(use={"aiJob": [ai_job_v3, ai_job_v2]})`. A run executes the
    definition of the version it recorded when that one is still registered, else the latest
    (whose `ctx.get_version` gates then keep it on its branch).
    """

    def __init__(
        self,
        workflows: Mapping[str, Workflow | list[Workflow] | tuple[Workflow, ...]],
        limiters: Iterable[Limiter] = (),
        schedules: Sequence[Schedule] = (),
    ) -> None:
        self.limiters: dict[str, Limiter] = {}
        for limiter in limiters:
            if not isinstance(limiter, Limiter):
                raise TypeError(f"{limiter!r} is not a Limiter (build it with workflows.Limiter(...))")
            if limiter.name in self.limiters:
                raise ValueError(f"limiter {limiter.name!r} is registered twice")
            self.limiters[limiter.name] = limiter
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
        self.schedules: dict[str, Schedule] = {}
        for given_schedule in schedules:
            bound = self._bind(given_schedule)
            if bound.name in self.schedules:
                raise ScheduleError(
                    f"{bound.label} is declared twice: give each schedule of a workflow its own name="
                )
            self.schedules[bound.name] = bound

    def _bind(self, given: Schedule) -> Schedule:
        """A schedule with its workflow's registered name (it may have been given the Workflow)."""
        if not isinstance(given, Schedule):
            raise TypeError(f"schedules takes schedule(...) declarations, not {type(given).__name__}")
        if isinstance(given.workflow, str):
            if given.workflow not in self.workflows:
                raise ScheduleError(f"{given.label}: no workflow named {given.workflow!r} in this setup")
            return given.bound(given.workflow)
        for name, definitions in self._versions.items():
            if any(wf is given.workflow for wf in definitions):
                return given.bound(name)
        raise ScheduleError(f"{given.label}: its workflow is not registered in this setup(use={{...}})")

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

    def concurrency_caps(self) -> dict[str, int]:
        """Each workflow whose latest definition limits its concurrency, with its max: what this
        code's claims enforce."""
        return {
            name: wf.concurrency.max
            for name, wf in sorted(self.workflows.items())
            if wf.concurrency is not None
        }

    def limiter(self, name: str) -> Limiter:
        """The limiter a step names with `limit=`."""
        try:
            return self.limiters[name]
        except KeyError:
            known = ", ".join(sorted(self.limiters)) or "none"
            raise BadInput(
                f"no limiter named {name!r} is registered (setup(..., limiters=[...]); known: {known})"
            ) from None

    def versions(self) -> dict[str, list[str]]:
        """Every name with the versions registered for it, latest first (a runner announces them)."""
        return {name: [wf.version for wf in self._versions[name]] for name in self.names()}

    def merged(self, other: Registry) -> Registry:
        clash = set(self._versions) & set(other._versions)
        if clash:
            raise ValueError(f"workflow names registered twice: {sorted(clash)}")
        limiters = dict(self.limiters)
        for name, limiter in other.limiters.items():
            if limiters.get(name, limiter) != limiter:
                raise ValueError(f"limiter {name!r} is registered twice with different limits")
            limiters[name] = limiter
        clash = set(self.schedules) & set(other.schedules)
        if clash:
            raise ValueError(f"schedule names declared twice: {sorted(clash)}")
        return Registry(
            {**self._versions, **other._versions},
            limiters=limiters.values(),
            schedules=[*self.schedules.values(), *other.schedules.values()],
        )

    def client(self, name: str, *, store: Store | None = None, clock: Clock | None = None) -> WorkflowClient:
        """A client for runs of `name`, over `store` (default: the store the app configured)."""
        self.get(name)
        return WorkflowClient(self, name, store=store, clock=clock)


def setup(
    use: Mapping[str, Workflow | list[Workflow] | tuple[Workflow, ...]],
    schedules: Sequence[Schedule] = (),
    *,
    limiters: Iterable[Limiter] = (),
) -> Registry:
    """Name workflows: `{"aiJob": ai_job}`, or `{"aiJob": [latest, older, ...]}`; declare their
    cron schedules, `schedules=[schedule("0 9 * * 1-5", "report", timezone="Europe/Paris")]`, and
    the named limiters their steps may share (`ctx.step(..., limit="openai")`)."""
    return Registry(use, limiters=limiters, schedules=schedules)
