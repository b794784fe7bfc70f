"""The runner's CPU per example job, split into engine, store, HTTP client, event loop and the
job's own code. Prints figures; asserts nothing.

    .venv/bin/python bench/job_cpu.py                 # SQLite: $BENCH_VAR/job_cpu.sqlite3 (fresh)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_job_cpu .venv/bin/python bench/job_cpu.py

The offline demo services run in their own process (`manage.py demoservices`, no latency). For each
way the steps get their HTTP clients (`shared`: one client per service for the runner's life, as
`WORKFLOWS["RUNNER_LIFESPAN"]` sets up; `per-step`: a new client, and so a new connection, for
every step), a fresh child process queues the jobs, runs a warm-up batch, then runs `runworkflows
--until-idle` over the measured batch in-process, twice: once plain, for the CPU time the process
used (getrusage: every thread) and the event loop's thread used (thread_time); once under cProfile
on the loop thread's CPU clock, for how that time splits by where the code lives. The split's shares
are applied to the plain run's figure (the profiler's own cost inflates its absolute times). The
database threads' CPU (the process's minus the loop thread's) counts as the store's.

The demo speaks plain HTTP on loopback: against real HTTPS services a new connection per step also
costs a TLS handshake (about 1-3 ms of CPU and a round trip or two), which `shared` saves as well.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._speed import ROUNDS, reference_ms  # noqa: E402

VAR = Path(os.environ.get("BENCH_VAR") or ROOT / "var" / "bench")  # the SQLite file, the demo's log
MODES = ("per-step", "shared")
# Where the loop thread's time goes, by the file of the function that spends it (first match wins).
PLACES = (
    ("store", ("/workflows/storage/django/", "/django/db/", "/psycopg", "sqlite3", "psycopg")),
    ("engine", ("/workflows/",)),
    ("job", ("/jobs/",)),
    (
        "HTTP client",
        ("/httpx2/", "/httpcore2/", "/h11/", "/h2/", "/hpack/", "/anyio/", "/sniffio/", "socket", "_ssl"),
    ),
    (
        "event loop",
        ("/asyncio/", "selectors.py", "select.epoll", "_asyncio", "/threading.py", "/concurrent/"),
    ),
)
COLUMNS = ("engine", "store", "HTTP client", "job", "event loop", "other")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=100, help="measured jobs per mode (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="jobs run first, not measured (default 10)")
    parser.add_argument("--concurrency", type=int, default=10, help="the runner's --concurrency (default 10)")
    parser.add_argument("--top", type=int, default=0, help="also print each mode's N costliest functions")
    parser.add_argument(
        "--profile-out", type=Path, help="write each mode's profile to DIR/<mode>.prof (pstats)"
    )
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    return parser.parse_args()


def prepare_database() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        path = VAR / "job_cpu.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    if url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urllib.parse.urlsplit(url)
        name = parts.path.lstrip("/")
        with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    return url


def place_of(where: str) -> str:
    for place, marks in PLACES:
        if any(mark in where for mark in marks):
            return place
    return "other"


def split_by_place(profile: cProfile.Profile, top: int) -> tuple[dict[str, float], list[list]]:
    """Seconds of the profiled thread's own time (tottime) by place, and the `top` functions."""
    spent = dict.fromkeys(COLUMNS, 0.0)
    functions = []
    for (filename, line, function), (_cc, calls, tottime, _ct, _callers) in pstats.Stats(
        profile
    ).stats.items():
        place = place_of(f"{filename} {function}")
        spent[place] += tottime
        functions.append(
            [tottime, calls, place, f"{filename.removeprefix(str(ROOT) + '/')}:{line} {function}"]
        )
    return spent, sorted(functions, reverse=True)[:top]


def run_batch(jobs: int, concurrency: int, profile: cProfile.Profile | None) -> dict[str, float]:
    """Queue `jobs` jobs and run them with `runworkflows --until-idle` in this process."""
    from django.core.management import call_command

    from jobs.samples import SAMPLE_PATH
    from jobs.submission import job_submit
    from workflows.models import Run

    body = {"title": "Bench call", "transcript": SAMPLE_PATH.read_text()}
    for _ in range(jobs):
        job_submit(body)
    process, loop_thread = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
    if profile is not None:
        profile.enable()
    call_command(
        "runworkflows", "--until-idle", "--concurrency", str(concurrency), stdout=open(os.devnull, "w")
    )
    if profile is not None:
        profile.disable()
    loop_thread, after = time.thread_time() - loop_thread, resource.getrusage(resource.RUSAGE_SELF)
    unfinished = Run.objects.exclude(status="completed").count()
    if unfinished:
        raise SystemExit(f"{unfinished} runs did not complete: see the runner's log lines above")
    cpu = (after.ru_utime - process.ru_utime) + (after.ru_stime - process.ru_stime)
    return {"cpu": cpu, "loop_thread": loop_thread}


def child(args: argparse.Namespace) -> None:
    """In a fresh process: one mode, a warm-up batch, then a plain and a profiled batch."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings

    lifespan = ["jobs.services.http.service_clients"] if args.child == "shared" else []
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RUNNER_LIFESPAN": lifespan}
    run_batch(args.warmup, args.concurrency, None)
    before = reference_ms()  # the machine's speed around the measured batch, in this process
    plain = run_batch(args.jobs, args.concurrency, None)
    plain["reference_ms"] = [before, reference_ms()]
    profile = cProfile.Profile(time.thread_time)
    run_batch(args.jobs, args.concurrency, profile)
    if args.profile_out:
        profile.dump_stats(args.profile_out / f"{args.child}.prof")
    split, top = split_by_place(profile, args.top)
    print(json.dumps({**plain, "split": split, "top": top, "jobs": args.jobs}))


def measure(mode: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--jobs", str(args.jobs)]
    command += ["--warmup", str(args.warmup), "--concurrency", str(args.concurrency), "--top", str(args.top)]
    if args.profile_out:
        args.profile_out.mkdir(parents=True, exist_ok=True)
        command += ["--profile-out", str(args.profile_out.resolve())]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} child failed:\n{done.stdout}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(vendor: str, figures: dict[str, dict], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    print(
        f"Runner CPU per example job on {vendor}, {args.jobs} jobs a mode, --concurrency {args.concurrency}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f} {load[1]:.2f}"
    )
    print(f"{'':10}{'all':>8}" + "".join(f"{c:>13}" for c in COLUMNS) + f"{'db threads':>12}   (ms per job)")
    for mode, f in figures.items():
        jobs, split = f["jobs"], f["split"]
        profiled = sum(split.values()) or 1.0
        cells = [f["loop_thread"] * split[c] / profiled / jobs * 1000 for c in COLUMNS]
        db_threads = max(0.0, f["cpu"] - f["loop_thread"]) / jobs * 1000
        cells[COLUMNS.index("store")] += db_threads
        print(
            f"  {mode:<8}{f['cpu'] / jobs * 1000:8.2f}"
            + "".join(f"{c:13.2f}" for c in cells)
            + f"{db_threads:12.2f}"
        )
    print("  (store includes the database threads' CPU; target: all <= 15 ms, engine <= 5 ms)")
    speeds = ", ".join(
        f"{mode} {f['reference_ms'][0]:.1f} / {f['reference_ms'][1]:.1f} ms" for mode, f in figures.items()
    )
    print(
        f"  reference workload of CPU before / after each measured batch, in its process: {speeds} (bench/_speed.py, best of {ROUNDS})"
    )
    for mode, f in figures.items():
        if f["top"]:
            print(f"{mode}: the costliest functions of the loop thread (profiled ms per job, calls per job)")
        for tottime, calls, place, where in f["top"]:
            print(f"  {tottime / f['jobs'] * 1000:7.3f} {calls / f['jobs']:8.1f}  {place:<12} {where}")


def main() -> None:
    args = parse_args()
    if args.child:
        child(args)
        return
    url = prepare_database()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)  # the in-memory channel layer: the figures are the runner's
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True
    )
    os.environ.update(env)
    import django

    django.setup()
    from django.db import connection

    from jobs.processes import start_demo_services

    log = VAR / "job_cpu-demo.log"
    demo, services = start_demo_services({**env, "DEMO_LATENCY_MS": "0"}, log)
    try:
        env |= services
        figures = {mode: measure(mode, args, env) for mode in MODES}
    finally:
        demo.stop()
    report(connection.vendor, figures, args)


if __name__ == "__main__":
    main()
