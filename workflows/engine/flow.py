"""Structured control flow over the same history: join, race, loop and try blocks.

Each opens child scopes (core.replay.child_scope) whose entries replay like the root's. Branches run
as asyncio tasks of one execution. A branch that must wait (a retry backoff, a sleep, a queue)
waits in-process while another branch is still running, then resumes from its scope's top;
once no branch is running, the whole run suspends and holds nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.exceptions import JoinError, RaceError, StepFailed
from ..core.jsonvalue import normalize
from ..core.recorder import Recorder
from ..core.records import Commit, EntryKind, EntryStatus, EntryWrite
from ..core.replay import Action, Decision, child_scope
from ..core.signals import Suspend, Unwind
from ..core.values import Failure, Loop, RaceResult, TryResult, error_info

Branch = Callable[[Any], Awaitable[Any]]  # a branch, iteration or block: `fn(ctx)` (a RunContext)
BRANCH_WAIT_POLL = 0.2  # seconds between looks for a message while a branch waits in-process


def _settle(ex: Recorder, decision: Decision, name: str, kind: str, status: str, output: Any = None,
            error: dict[str, Any] | None = None) -> EntryWrite:  # fmt: skip
    now = ex.clock.now()
    return EntryWrite(
        id=decision.entry_id,
        scope=decision.scope,
        position=decision.position,
        name=name,
        kind=kind,
        status=status,
        input=decision.input,
        output=output,
        error=error,
        started_at=decision.started_at or now,
        finished_at=now,
    )


async def _run_branch(ex: Recorder, scope: str, fn: Branch) -> tuple[str, Any]:
    """One pass over a branch: ("ok", value) | ("error", exc) | ("suspended", Suspend)."""
    ex.history.restart(scope)
    try:
        value = await fn(ex.context(scope))
        ex.history.check_finished(scope)
        return "ok", normalize(value, f"the result of branch {scope!r}")
    except Suspend as suspend:
        return "suspended", suspend
    except Exception as exc:
        return "error", exc


async def _wait_then_run(ex: Recorder, scope: str, fn: Branch, suspend: Any) -> tuple[str, Any]:
    """Wait in-process for a branch's wake (its time, or a message on its queues), then resume it."""
    while True:
        if suspend.wake_at is not None and ex.clock.now() >= suspend.wake_at:
            break
        if suspend.wait_queues is not None:
            queues = list(suspend.wait_queues) or None
            if await ex.available_messages(queues, 1):
                break
        delay = BRANCH_WAIT_POLL
        if suspend.wake_at is not None:
            delay = min(delay, max(0.0, (suspend.wake_at - ex.clock.now()).total_seconds()))
        await asyncio.sleep(delay)
    return await _run_branch(ex, scope, fn)


async def _branches(
    ex: Recorder, base_scope: str, name: str, branches: dict[str, Branch], first_wins: bool
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], str | None]:
    """Drive branches until all settle (join) or one succeeds (race). Returns (results, errors,
    winner); raises Suspend when every unsettled branch waits."""
    if not branches:
        raise ValueError(f"{name!r} needs at least one branch")
    scopes = {b: child_scope(base_scope, name, branch=b) for b in branches}
    tasks: dict[str, asyncio.Task] = {
        b: asyncio.create_task(_run_branch(ex, scopes[b], fn)) for b, fn in branches.items()
    }
    waiting: dict[str, Any] = {}  # branch -> its Suspend, while it waits in-process
    results: dict[str, Any] = {}
    errors: dict[str, dict[str, Any]] = {}
    try:
        while tasks:
            done, _ = await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED)
            for branch in [b for b, t in tasks.items() if t in done]:
                outcome, value = tasks.pop(branch).result()  # an _Unwind (cancel, abort) propagates
                waiting.pop(branch, None)
                if outcome == "ok":
                    results[branch] = value
                    if first_wins:
                        return results, errors, branch
                elif outcome == "error":
                    errors[branch] = error_info(value)
                else:
                    waiting[branch] = value
            running = [b for b in tasks if b not in waiting]
            if waiting and not running:
                # Nothing runs: hand the run back until the earliest wake or a message.
                pending = [s for b, s in waiting.items()]
                wakes = [s.wake_at for s in pending if s.wake_at is not None]
                queue_sets = [s.wait_queues for s in pending if s.wait_queues is not None]
                queues: tuple[str, ...] | None = None
                if queue_sets:
                    queues = (
                        ()
                        if any(q == () for q in queue_sets)
                        else tuple(sorted({x for q in queue_sets for x in q}))
                    )
                raise Suspend(min(wakes) if wakes else None, queues)
            for branch, suspend in list(waiting.items()):
                if branch not in tasks:
                    tasks[branch] = asyncio.create_task(
                        _wait_then_run(ex, scopes[branch], branches[branch], suspend)
                    )
        return results, errors, None
    finally:
        for task in tasks.values():
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks.values(), return_exceptions=True)


async def join(ex: Recorder, scope: str, name: str, branches: dict[str, Branch]) -> dict[str, Any]:
    decision = ex.enter(scope, name, EntryKind.JOIN)
    if decision.action == Action.REPLAY:
        return decision.value
    if decision.action == Action.RAISE:
        raise JoinError(name, decision.error.get("branches", {}))
    results, errors, _ = await _branches(ex, scope, name, branches, first_wins=False)
    ex.raise_if_fatal()  # a branch diverged: record nothing, the run fails with it
    if errors:
        entry = _settle(ex, decision, name, EntryKind.JOIN, EntryStatus.FAILED, error={"branches": errors})
        await ex.commit(Commit(entries=[(entry, None)]))
        raise JoinError(name, errors)
    entry = _settle(ex, decision, name, EntryKind.JOIN, EntryStatus.COMPLETED, output=results)
    await ex.commit(Commit(entries=[(entry, None)]))
    return results


async def race(ex: Recorder, scope: str, name: str, branches: dict[str, Branch]) -> RaceResult:
    decision = ex.enter(scope, name, EntryKind.RACE)
    if decision.action == Action.REPLAY:
        return RaceResult(winner=decision.value["winner"], value=decision.value["value"])
    if decision.action == Action.RAISE:
        raise RaceError(name, decision.error.get("branches", {}))
    results, errors, winner = await _branches(ex, scope, name, branches, first_wins=True)
    ex.raise_if_fatal()
    if winner is None:
        entry = _settle(ex, decision, name, EntryKind.RACE, EntryStatus.FAILED, error={"branches": errors})
        await ex.commit(Commit(entries=[(entry, None)]))
        raise RaceError(name, errors)
    output = {"winner": winner, "value": results[winner]}
    await ex.commit(
        Commit(entries=[(_settle(ex, decision, name, EntryKind.RACE, EntryStatus.COMPLETED, output), None)])
    )
    return RaceResult(winner=winner, value=results[winner])


async def loop(
    ex: Recorder,
    scope: str,
    name: str,
    fn: Callable[[Any, Any], Awaitable[Any]],
    state: Any,
    history_size: int | None,
) -> Any:
    """Each finished iteration checkpoints (iteration, state) in the loop's entry and prunes the
    iteration that fell out of `history_size`: resume starts at the current iteration, and the
    history stays bounded however long the loop runs."""
    if history_size is not None and history_size < 1:
        raise ValueError("history_size must be >= 1 (or None to keep every iteration)")
    decision = ex.enter(scope, name, EntryKind.LOOP, input={"history_size": history_size})
    if decision.action == Action.REPLAY:
        return decision.value
    if decision.recorded is not None:  # resume at the iteration the loop's entry checkpointed
        iteration, state = decision.value["iteration"], decision.value["state"]
        entry_id = decision.entry_id
    else:
        iteration, state = 0, normalize(state, f"the state of loop {name!r}")
        now = ex.clock.now()
        start = EntryWrite(
            id=None, scope=decision.scope, position=decision.position, name=name, kind=EntryKind.LOOP,
            status=EntryStatus.WAITING, input=decision.input,
            output={"iteration": 0, "state": state}, started_at=now,
        )  # fmt: skip
        result = await ex.commit(Commit(entries=[(start, None)]))
        entry_id = result.entry_ids[0]
    started_at = decision.started_at or ex.clock.now()
    while True:
        it_scope = child_scope(scope, name, iteration=iteration)
        outcome = await fn(ex.context(it_scope), state)
        ex.history.check_finished(it_scope)
        entry = EntryWrite(
            id=entry_id, scope=decision.scope, position=decision.position, name=name, kind=EntryKind.LOOP,
            status=EntryStatus.WAITING, input=decision.input, started_at=started_at,
        )  # fmt: skip
        if isinstance(outcome, Loop.Done):
            value = normalize(outcome.value, f"the result of loop {name!r}")
            entry.status, entry.output, entry.finished_at = EntryStatus.COMPLETED, value, ex.clock.now()
            entry.meta = {"iterations": iteration + 1}
            await ex.commit(Commit(entries=[(entry, None)]))
            return value
        if not isinstance(outcome, Loop.Next):
            raise TypeError(f"loop {name!r}: the body must return Loop.next(state) or Loop.done(value)")
        state = normalize(outcome.state, f"the state of loop {name!r}")
        iteration += 1
        entry.output = {"iteration": iteration, "state": state}
        commit = Commit(entries=[(entry, None)])
        old = iteration - 1 - history_size if history_size is not None else -1
        if old >= 0:
            commit.prune.append(child_scope(scope, name, iteration=old))
        await ex.commit(commit)


async def try_block(ex: Recorder, scope: str, name: str, fn: Branch) -> TryResult:
    decision = ex.enter(scope, name, EntryKind.TRY)
    if decision.action == Action.REPLAY:
        out = decision.value
        if out["ok"]:
            return TryResult(ok=True, value=out["value"])
        return TryResult(
            ok=False, failure=Failure(kind=out["failure"]["kind"], error=out["failure"]["error"])
        )
    block_scope = child_scope(scope, name)
    try:
        value = await fn(ex.context(block_scope))
        ex.history.check_finished(block_scope)
        value = normalize(value, f"the result of try block {name!r}")
        result = TryResult(ok=True, value=value)
        output: dict[str, Any] = {"ok": True, "value": value}
    except Unwind:
        raise
    except Exception as exc:
        ex.raise_if_fatal()
        kind = exc.kind if isinstance(exc, StepFailed) else "error"
        failure = Failure(kind=kind, error=error_info(exc))
        result = TryResult(ok=False, failure=failure)
        output = {"ok": False, "failure": {"kind": failure.kind, "error": failure.error}}
    entry = _settle(ex, decision, name, EntryKind.TRY, EntryStatus.COMPLETED, output=output)
    await ex.commit(Commit(entries=[(entry, None)]))
    return result
