"""The open-loop load of bench/web_load.py: requests on a fixed schedule whatever the answers,
and what they measured (latencies from each request's scheduled time, errors by kind)."""

from __future__ import annotations

import asyncio
import math
import statistics
import uuid
from dataclasses import dataclass, field

from bench._web_client import Answer, Client, ConnectionFailed
from bench._web_servers import KEEPALIVE_CLIENT_S

KINDS = ("503", "5xx", "html", "timeout", "conn", "4xx")
Result = tuple[float, float, str | None]  # latency from the scheduled send, lag of the send, error kind


@dataclass
class RateFigures:
    rate: float
    duration_s: float
    sent: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    p50_ms: float = math.nan
    p90_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan
    lag_p99_ms: float = math.nan
    achieved_rps: float = 0.0
    completions_per_s: float = 0.0
    web_cpu_pct: float = 0.0
    runner_cpu_pct: float = 0.0
    web_cpu_ms_per_ok: float = math.nan  # the web process's CPU per accepted request

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def error_rate(self) -> float:
        return self.error_count / self.sent if self.sent else 0.0


def _kind(response: Answer) -> str | None:
    """None for a success; else the error's kind."""
    html = response.headers.get("content-type", "").startswith("text/html")
    if response.status_code < 300 and not html:
        return None
    if html:
        return "html"
    if response.status_code == 503 and response.headers.get("retry-after"):
        return "503"
    if response.status_code >= 500:
        return "5xx"
    return "4xx"


def percentile(ordered: list[float], p: float) -> float:
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def load(
    http: Client, path: str, body: bytes, rate: float, duration: float, timeout: float
) -> tuple[list[Result], float]:
    """Send `rate` requests a second for `duration` seconds on schedule; return, per request,
    (latency from its scheduled time, lag of its actual send, error kind or None), and the
    seconds from the first scheduled send to the last answer."""
    loop = asyncio.get_running_loop()
    results: list[Result] = []
    total = round(rate * duration)
    start = loop.time() + 0.05

    async def one(scheduled: float) -> None:
        lag = loop.time() - scheduled
        kind: str | None
        try:
            # One deadline for the whole request, connecting and reading included.
            response = await asyncio.wait_for(
                http.post(
                    path, body, {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
                ),
                timeout=max(0.001, scheduled + timeout - loop.time()),
            )
            kind = _kind(response)
        except TimeoutError:
            kind = "timeout"
        except ConnectionFailed:
            kind = "conn"
        results.append((loop.time() - scheduled, lag, kind))

    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    return results, loop.time() - start


def send_load(
    base: str, path: str, body: bytes, rate: float, duration: float, timeout: float
) -> tuple[list[Result], float]:
    """`load` with a client of its own (bench/_web_client.py): a connection per request in
    flight, so none queues behind another (open loop), and idle ones dropped before the server's
    keep-alive would close them under it (reusing a connection the server is closing fails the
    request: counted as `conn`)."""

    async def run() -> tuple[list[Result], float]:
        http = Client(base, keepalive_expiry=KEEPALIVE_CLIENT_S)
        try:
            return await load(http, path, body, rate, duration, timeout)
        finally:
            await http.aclose()

    return asyncio.run(run())


def summarize(rate: float, duration: float, results: list[Result], elapsed: float) -> RateFigures:
    """The figures of one rate's requests (latencies of errors included)."""
    figures = RateFigures(rate=rate, duration_s=duration, sent=len(results))
    for _latency, _lag, kind in results:
        if kind is None:
            figures.ok += 1
        else:
            figures.errors[kind] += 1
    every = sorted(latency * 1000 for latency, _lag, _kind in results)
    figures.p50_ms = statistics.median(every) if every else math.nan
    figures.p90_ms = percentile(every, 90)
    figures.p99_ms = percentile(every, 99)
    figures.max_ms = every[-1] if every else math.nan
    figures.lag_p99_ms = percentile(sorted(lag * 1000 for _l, lag, _k in results), 99)
    figures.achieved_rps = figures.ok / elapsed if elapsed else 0.0
    return figures
