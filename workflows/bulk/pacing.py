"""Pacing a bulk operation to the runners' claims.

A bulk cancel, replay or retry-now makes each run of its batch due now, for a runner to take up
(a cancelled waiting run is woken to finish as cancelled and run its compensations). Claims take
due runs first come, first served; 10,000 of them made due in a few seconds put every other
run's next step behind them (measured in `bench/bulk.py`: a running runner's step latency went
from milliseconds to 20 s for the ~40 s it took to work through them). So before its next
batch, an operation waits until the runners have taken up most of the runs its last batch made
due: at most about one batch of its runs stands in the claims' queue at any time, and other
runs' steps wait behind at most that.

It waits only while a runner is alive to take them up (a bulk action with no runner up goes
at full speed: there is nothing to protect), and gives up on pacing for the rest of the
operation when the runners take up none of them for WORKFLOWS["BULK_PACE_SECONDS"] (runners
that do not serve those workflows, or a paused one). While it waits it renews the operation's
lease and sees an abort.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import conf
from ..core.records import RunStatus
from ..models import BulkOperation, Run

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.1
DUE = (RunStatus.PENDING, RunStatus.WAITING)  # not claimed yet (a claimed run is running)


@dataclass
class Pacer:
    """One operation's pacing, kept across its batches."""

    op_id: int
    owner: str
    lease_seconds: float
    patience: float = 10.0
    enabled: bool = True
    waited: float = 0.0  # seconds spent waiting, in all (the operation's progress shows it)

    def after_batch(self, run_ids: list[str], should_stop: Callable[[], bool] | None = None) -> None:
        """Wait until at most a quarter of `run_ids` (the runs the last batch acted on) are still
        due and unclaimed; or until no runner is alive, the runners make no progress for
        `patience` seconds, the operation is aborted or taken over, or `should_stop()`."""
        if not self.enabled or not run_ids or self.patience <= 0:
            return
        if not _runner_alive():
            return
        started = time.monotonic()
        try:
            self._wait(run_ids, should_stop)
        finally:
            self.waited += time.monotonic() - started

    def _wait(self, run_ids: list[str], should_stop: Callable[[], bool] | None) -> None:
        enough = len(run_ids) // 4
        fewest, progress_at, renewed_at = len(run_ids) + 1, time.monotonic(), time.monotonic()
        while True:
            left = _still_due(run_ids, _now())
            if left <= enough:
                return
            now = time.monotonic()
            if left < fewest:
                fewest, progress_at = left, now
            elif now - progress_at > self.patience:
                self.enabled = False
                logger.warning(
                    "bulk operation %s: the runners took up none of its due runs for %.0f s; "
                    "it goes on without pacing", self.op_id, self.patience,
                )  # fmt: skip
                return
            if should_stop is not None and should_stop():
                return
            if now - renewed_at > self.lease_seconds / 4:
                if not self._renew():
                    return
                renewed_at = now
            elif BulkOperation.objects.filter(id=self.op_id, abort_requested=True).exists():
                return
            time.sleep(POLL_SECONDS)

    def _renew(self) -> bool:
        """Renew the operation's lease; False when it is no longer ours or was aborted."""
        renewed = BulkOperation.objects.filter(
            id=self.op_id, lease_owner=self.owner, status=BulkOperation.Status.RUNNING, abort_requested=False
        ).update(lease_expires_at=_now() + dt.timedelta(seconds=self.lease_seconds))
        return bool(renewed)


def _now() -> dt.datetime:
    return conf.default_store().shared_clock.now()


def _still_due(run_ids: list[str], now: dt.datetime) -> int:
    return Run.objects.filter(id__in=run_ids, status__in=DUE, wake_at__lte=now).count()


def _runner_alive() -> bool:
    store = conf.default_store()
    now = store.shared_clock.now()
    return any(runner.alive(now) for runner in store.list_runners())
