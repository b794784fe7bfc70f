"""bench/web_load.py's printed report: the table per rate, the CPU per request against the bare
floor, the drain (with --no-runner) and the targets."""

from __future__ import annotations

import argparse
import math
from typing import Any

from bench._web_load import RateFigures

CPU_MS_TARGET = 2.5  # web CPU per accepted POST /jobs, ms
FLOOR_RATIO_TARGET = 2.0  # ... and at most this many times the bare floor's


def sustainable(rates: list[RateFigures], p99_ms: float) -> float | None:
    """The highest rate with p99 within the bound and no error at all."""
    good = [r.rate for r in rates if r.error_count == 0 and r.p99_ms <= p99_ms]
    return max(good) if good else None


def cpu_summary(rates: list[RateFigures], floor: RateFigures | None) -> dict[str, Any]:
    """POST /jobs's web CPU per accepted request at the floor's rate (else the first), the floor's
    and their ratio."""
    if not rates:
        return {}
    same = [r for r in rates if floor is not None and r.rate == floor.rate] or rates[:1]
    jobs_ms = same[0].web_cpu_ms_per_ok
    floor_ms = floor.web_cpu_ms_per_ok if floor is not None else math.nan
    ratio = jobs_ms / floor_ms if floor_ms and not math.isnan(floor_ms) else math.nan
    return {"rate": same[0].rate, "jobs_ms": jobs_ms, "floor_ms": floor_ms, "ratio": ratio}


def _row(r: RateFigures) -> str:
    e = r.errors
    return (
        f"{r.rate:6.0f} {r.sent:6d} {r.achieved_rps:7.1f} {r.p50_ms:8.1f} {r.p90_ms:8.1f} {r.p99_ms:8.1f} "
        f"{r.max_ms:8.1f} {r.lag_p99_ms:7.1f} {100 * r.error_rate:6.2f}  {e['503']:5d} {e['5xx']:4d} "
        f"{e['html']:4d} {e['timeout']:4d} {e['conn']:4d} {e['4xx']:4d} {r.completions_per_s:7.1f} "
        f"{r.web_cpu_pct:5.0f} {r.runner_cpu_pct:5.0f} {r.web_cpu_ms_per_ok:6.2f}"
    )


def report(
    args: argparse.Namespace,
    rates: list[RateFigures],
    floor: RateFigures | None,
    drain: dict[str, Any] | None,
    meta: dict[str, Any],
) -> str:
    runner = (
        "runner stopped during the load" if args.no_runner else f"1 runner (--concurrency {args.concurrency})"
    )
    lines = [
        f"POST /jobs, open loop, 1 {args.server} process + {runner} on {meta['db']}, {meta['cpus']} CPUs "
        f"shared with the load generator, demo services and the database; {meta['date']}, "
        f"load average before: {meta['loadavg']}; {meta['speed']}",
        f"{'rate':>6} {'sent':>6} {'ok/s':>7} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'lag99':>7} "
        f"{'err%':>6}  {'503':>5} {'5xx':>4} {'html':>4} {'tmo':>4} {'conn':>4} {'4xx':>4} "
        f"{'runs/s':>7} {'web%':>5} {'run%':>5} {'cpu/ok':>6}",
        *(_row(r) for r in rates),
        "(latencies in ms from each request's scheduled send, errors included; runs/s: jobs the runner",
        " completed per second in the window; web% / run%: CPU of the web process / the runner;",
        " cpu/ok: ms of web CPU per accepted request)",
    ]
    if floor is not None:
        lines.append("bare Django JSON view (bench/web_settings.py), same server, same run:")
        lines.append(_row(floor))
    cpu = cpu_summary(rates, floor)
    if cpu:
        lines.append(
            f"web CPU per accepted POST /jobs at {cpu['rate']:g} req/s: {cpu['jobs_ms']:.2f} ms; bare view: "
            f"{cpu['floor_ms']:.2f} ms; ratio {cpu['ratio']:.2f}x (targets: <= {CPU_MS_TARGET:g} ms and "
            f"<= {FLOOR_RATIO_TARGET:g}x): "
            + ("MET" if cpu["jobs_ms"] <= CPU_MS_TARGET and cpu["ratio"] <= FLOOR_RATIO_TARGET else "NOT MET")
        )
    if drain is not None:
        lines.append(
            f"drain by one runner: {drain['runs']} jobs in {drain['seconds']:.1f} s "
            f"({drain['runs_per_s']:.1f}/s); published: {drain['published']} of {drain['runs']}: "
            + ("MET" if drain["published"] == drain["runs"] else "NOT MET")
        )
    best = sustainable(rates, args.p99_ms)
    lines.append(
        f"sustainable rate (p99 <= {args.p99_ms:g} ms, 0 errors): "
        + (f"{best:g} req/s" if best is not None else "none of the rates tried")
    )
    met = best is not None and best >= args.target_rate
    lines.append(
        f"target: >= {args.target_rate:g} req/s with p99 <= {args.p99_ms:g} ms and 0 errors: "
        + ("MET" if met else "NOT MET")
    )
    return "\n".join(lines)
