"""Named limiters that steps share across runs and runners: `Limiter("openai",
requests_per_minute=500, tokens_per_minute=200_000, concurrency=20)` and `ctx.step(...,
limit="openai")`.

A limiter admits a step attempt when, over the last minute, fewer attempts started than
`requests_per_minute` and fewer tokens were used than `tokens_per_minute`, and fewer than
`concurrency` attempts hold it now. Tokens are what the steps *recorded* (`step.meta["usage"]`),
so the limiter throttles spend, not only calls: a model call cannot know its cost before it is
made, so the budget is checked before the attempt and charged after it.

The decision is the store's (every runner shares it); this module holds the declaration and the
arithmetic (`decide`), over the uses the store reads.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .exceptions import BadInput

WINDOW = dt.timedelta(minutes=1)  # the rolling window of requests_per_minute / tokens_per_minute
RECHECK = dt.timedelta(seconds=1)  # a step waiting for a concurrency slot looks again this often


@dataclass(frozen=True)
class Limiter:
    name: str
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 100:
            raise BadInput(f"a limiter needs a name of 1 to 100 characters, not {self.name!r}")
        figures = {
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "concurrency": self.concurrency,
        }
        for field_name, value in figures.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise BadInput(
                    f"limiter {self.name!r}: {field_name} must be a whole number >= 1, not {value!r}"
                )
        if all(value is None for value in figures.values()):
            raise BadInput(
                f"limiter {self.name!r} limits nothing: give requests_per_minute, tokens_per_minute "
                "or concurrency"
            )

    def describe(self) -> str:
        """What it allows, as the inspector says it: "12 req/min, 40,000 tokens/min, 4 at once"."""
        parts = []
        if self.requests_per_minute is not None:
            parts.append(f"{self.requests_per_minute:,} req/min")
        if self.tokens_per_minute is not None:
            parts.append(f"{self.tokens_per_minute:,} tokens/min")
        if self.concurrency is not None:
            parts.append(f"{self.concurrency:,} at once")
        return ", ".join(parts)


@dataclass(frozen=True)
class Grant:
    """What `acquire` answers: a slot (release it after the attempt), or when to ask again."""

    slot: int | None  # the slot's id when admitted
    retry_at: dt.datetime | None = None  # when not admitted: the earliest time it may be
    reason: str = ""  # when not admitted: which figure is used up

    @property
    def admitted(self) -> bool:
        return self.slot is not None


@dataclass(frozen=True)
class SlotUse:
    """One recorded use of a limiter, as the decision reads it."""

    acquired_at: dt.datetime
    released_at: dt.datetime | None
    expires_at: dt.datetime  # a slot whose holder crashed stops counting as held after this
    tokens: int


def decide(limiter: Limiter, uses: list[SlotUse], now: dt.datetime) -> tuple[bool, dt.datetime | None, str]:
    """Whether a new attempt may start now, given the limiter's uses since `now - WINDOW` and
    those still held; else when to ask again and why."""
    since = now - WINDOW
    waits: list[tuple[dt.datetime, str]] = []
    if limiter.requests_per_minute is not None:
        started = sorted(u.acquired_at for u in uses if u.acquired_at > since)
        if len(started) >= limiter.requests_per_minute:
            # Admitted again once enough of the window's starts age out of it.
            oldest = started[len(started) - limiter.requests_per_minute]
            waits.append((oldest + WINDOW, f"{limiter.requests_per_minute:,} req/min"))
    if limiter.tokens_per_minute is not None:
        spent = sorted(
            (u.released_at, u.tokens)
            for u in uses
            if u.released_at is not None and u.released_at > since and u.tokens
        )
        total = sum(tokens for _at, tokens in spent)
        if total >= limiter.tokens_per_minute:
            for at, tokens in spent:  # the time enough tokens age out to fall under the budget
                total -= tokens
                if total < limiter.tokens_per_minute:
                    waits.append((at + WINDOW, f"{limiter.tokens_per_minute:,} tokens/min"))
                    break
    if limiter.concurrency is not None:
        held = [u for u in uses if u.released_at is None and u.expires_at > now]
        if len(held) >= limiter.concurrency:
            soonest = min(u.expires_at for u in held)
            waits.append((min(now + RECHECK, soonest), f"{limiter.concurrency:,} at once"))
    if not waits:
        return True, None, ""
    retry_at, reason = max(waits)
    return False, max(retry_at, now), reason


def tokens_used(meta: Any) -> int:
    """The tokens a step attempt recorded in `step.meta["usage"]`: `total_tokens`, else the sum
    of input/prompt and output/completion tokens (OpenAI's and the GenAI conventions' names)."""
    usage = meta.get("usage") if isinstance(meta, dict) else None
    if not isinstance(usage, dict):
        return 0

    def number(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return int(value)
        return 0

    total = number("total_tokens")
    if total:
        return total
    return number("prompt_tokens", "input_tokens") + number("completion_tokens", "output_tokens")
