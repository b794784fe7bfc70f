"""The retry policy of a step: a pure object, tested without a database."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    max_retries: int = 3  # retries, so max_retries + 1 attempts
    backoff_base: float = 0.1  # seconds
    backoff_max: float = 30.0  # seconds
    retry_on_timeout: bool = False
    on_exhausted: str = "fail"  # ON_EXHAUSTED

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError("backoff must be >= 0")

    def delay_for(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1, 2, ...): min(base * 2**n, max)."""
        return min(self.backoff_base * (2**retry), self.backoff_max)

    def decide(self, attempt: int, outcome: str, retry_after: float | None = None) -> Decision:
        """After attempt `attempt` (1-based) failed with `outcome` (error | timeout | critical)."""
        if outcome == "critical":
            return Decision(will_retry=False, delay=None, kind="critical")
        if outcome == "timeout" and not self.retry_on_timeout:
            return Decision(will_retry=False, delay=None, kind="timeout")
        if attempt > self.max_retries:
            return Decision(will_retry=False, delay=None, kind="exhausted")
        delay = retry_after if retry_after is not None else self.delay_for(attempt)
        return Decision(will_retry=True, delay=delay, kind=None)

    def remaining_after(self, attempt: int) -> int:
        return max(0, self.max_retries + 1 - attempt)


ON_EXHAUSTED = ("fail", "pause")


def check_on_exhausted(value: str | None) -> None:
    """`on_exhausted` is "fail" (the default: the step fails, and so does the run unless caught)
    or "pause" (the run is paused, its step waiting for one more attempt on resume)."""
    if value is not None and value not in ON_EXHAUSTED:
        raise ValueError(f"on_exhausted must be one of {', '.join(ON_EXHAUSTED)}, not {value!r}")


@dataclass(frozen=True)
class Decision:
    will_retry: bool
    delay: float | None  # seconds before the next attempt, when will_retry
    kind: str | None  # why it will not retry: critical | timeout | exhausted
