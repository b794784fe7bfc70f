"""Reading the ledger (tests/multihost/flows.py writes it) and the checks made on it.

A *body* is one execution of a step body: its run, step, runner (`host:pid`), and its interval on
the machine's monotonic clock. A *fault* is what the test did to one host's runner, from when it
was in place (`start`) to when it was undone (`end`; None for a kill). Definitions the checks use:

- A body is *cut* by a fault of its runner when it began before the fault was undone: its record
  may never have landed (frozen, partitioned, killed), so another runner may run that step again.
- Two bodies of one run *overlap* when each began before the other ended (a body with no end line
  ended at its runner's kill, or never). An overlap is *excused* only when the body that began
  first was already running when its runner's fault began (begin <= fault.start) and the other
  began after it (a takeover): the one body a frozen or cut-off runner was inside when it froze.
  Every other overlap means two live runners executed one run at once.
- A run is *taken over* from a faulted runner at the first begin, at or after the fault's start,
  of another runner's body of that run. From then on the faulted runner must begin no body of it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

INF = math.inf


@dataclass(frozen=True)
class Body:
    run: str
    step: str
    host: str
    pid: int
    begin: float
    end: float  # INF: no end line (killed, or still running)
    wall: float  # time.time() at begin as the runner saw it (faked under libfaketime)

    @property
    def runner(self) -> str:
        return f"{self.host}:{self.pid}"


@dataclass
class Fault:
    host: str
    kind: str
    start: float
    end: float | None = None  # None: never undone (a kill)
    pid: int | None = None  # the runner process it hit (None: every process of the host)

    def hits(self, body: Body) -> bool:
        return body.host == self.host and (self.pid is None or body.pid == self.pid)


@dataclass
class Ledger:
    bodies: list[Body]
    effects: list[tuple[str, str, str]]  # (run, step, runner)
    gaps: list[tuple[str, str, str, float]]  # (run, step, runner, mono)

    @classmethod
    def read(cls, path: Path, faults: Iterable[Fault] = ()) -> Ledger:
        """Parse the file; a body without an end line ends at its runner's kill, if it was killed."""
        begins: dict[tuple[str, str, str, str, str], float] = {}
        ends: dict[tuple[str, str, str, str, str], float] = {}
        effects, gaps = [], []
        text = path.read_text() if path.exists() else ""
        for line in text.splitlines():
            kind, run, step, host, pid, *times = line.split()
            if kind == "B":
                begins[(run, step, host, pid, times[0])] = float(times[1])
            elif kind == "E":
                ends[(run, step, host, pid, times[0])] = float(times[1])
            elif kind == "X":
                effects.append((run, step, f"{host}:{pid}"))
            elif kind == "G":
                gaps.append((run, step, f"{host}:{pid}", float(times[0])))
        kills = {(f.host, f.pid): f.start for f in faults if f.kind == "kill"}
        bodies = []
        for (run, step, host, pid, begin), wall in begins.items():
            killed = kills.get((host, int(pid)), INF)
            end = ends.get((run, step, host, pid, begin), killed)
            bodies.append(Body(run, step, host, int(pid), float(begin), end, wall))
        bodies.sort(key=lambda b: b.begin)
        return cls(bodies, effects, gaps)

    def by_run(self) -> dict[str, list[Body]]:
        runs: dict[str, list[Body]] = defaultdict(list)
        for body in self.bodies:
            runs[body.run].append(body)
        return runs

    def runners(self) -> set[str]:
        return {b.runner for b in self.bodies}

    def hosts(self) -> set[str]:
        return {b.host for b in self.bodies}


def cut(body: Body, faults: Iterable[Fault]) -> bool:
    return any(f.hits(body) and body.begin < (INF if f.end is None else f.end) for f in faults)


def overlaps(ledger: Ledger, faults: list[Fault]) -> list[str]:
    """Two runners in one run at once, apart from the excused overlaps (module docstring)."""
    wrong = []
    for run, bodies in ledger.by_run().items():
        for i, first in enumerate(bodies):  # sorted by begin
            for second in bodies[i + 1 :]:
                if second.begin >= first.end:
                    continue
                if first.runner == second.runner:
                    continue  # one runner's own sequence (join branches would be; these flows have none)
                excused = any(f.hits(first) and first.begin <= f.start <= second.begin for f in faults)
                if not excused:
                    wrong.append(
                        f"run {run}: {first.step} on {first.runner} [{first.begin:.3f}, {first.end:.3f}]"
                        f" overlaps {second.step} on {second.runner} [{second.begin:.3f}, {second.end:.3f}]"
                    )
    return wrong


def began_after_takeover(ledger: Ledger, faults: list[Fault]) -> list[str]:
    """A faulted runner that began a body of a run after another runner had taken it over."""
    wrong = []
    for fault in faults:
        for run, bodies in ledger.by_run().items():
            others = [b.begin for b in bodies if not fault.hits(b) and b.begin >= fault.start]
            mine = [b for b in bodies if fault.hits(b) and b.begin < fault.start]
            if not others or not mine:
                continue  # not a run the faulted runner held and lost
            taken = min(others)
            late = [b for b in bodies if fault.hits(b) and b.runner == mine[-1].runner and b.begin >= taken]
            wrong += [
                f"run {run}: {b.runner} began {b.step} at {b.begin:.3f}, after the takeover at {taken:.3f}"
                f" ({fault.kind} from {fault.start:.3f})"
                for b in late
            ]
    return wrong


def executed_once(ledger: Ledger, faults: list[Fault], steps: dict[str, list[str]]) -> list[str]:
    """Each expected step of each run ran at least once, and exactly once apart from bodies cut by
    a fault (those may have lost their record, so the step may rightly run again elsewhere)."""
    wrong = []
    runs = ledger.by_run()
    for run, expected in steps.items():
        for step in expected:
            bodies = [b for b in runs.get(run, []) if b.step == step]
            whole = [b for b in bodies if not cut(b, faults)]
            if not bodies or len(whole) > 1:
                wrong.append(f"run {run} step {step}: {len(bodies)} bodies, {len(whole)} not cut by a fault")
    return wrong


def side_effects_once(ledger: Ledger, faults: list[Fault], runs: Iterable[str]) -> list[str]:
    """Each run's side effect happened, and once apart from cut bodies' (at-least-once steps)."""
    cut_runners = {
        (b.run, b.step, b.runner) for b in ledger.bodies if cut(b, faults)
    }  # a runner's cut body of that step
    counts: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for effect in ledger.effects:
        counts[effect[0]].append(effect)
    wrong = []
    for run in runs:
        whole = [e for e in counts.get(run, []) if e not in cut_runners]
        if not counts.get(run) or len(whole) > 1:
            wrong.append(f"run {run}: side effects {counts.get(run, [])}")
    return wrong


def peak(bodies: Iterable[Body]) -> int:
    """The most bodies running at one instant (an end at the same time as a begin does not count)."""
    edges = sorted([(b.begin, 1) for b in bodies] + [(b.end, -1) for b in bodies])
    inside = top = 0
    for _at, step in edges:
        inside += step
        top = max(top, inside)
    return top


def skews(ledger: Ledger, wall_minus_mono: float) -> dict[str, float]:
    """Each host's wall clock minus the machine's, as its bodies recorded it (median)."""
    seen: dict[str, list[float]] = defaultdict(list)
    for body in ledger.bodies:
        seen[body.host].append(body.wall - body.begin - wall_minus_mono)
    return {host: sorted(values)[len(values) // 2] for host, values in seen.items()}
