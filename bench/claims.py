"""What does a claim cost with concurrency groups? (issue 13)

One store call, `DjangoStore.claim(limit=1)`, timed alone (its run is created before and completed
after, untimed), on SQLite and PostgreSQL, in each of these situations:

- ungrouped, nothing waiting: a runner of a workflow without `concurrency` (the claim as before);
- ungrouped, 10k held back: the same runner also serves a grouped workflow whose 10,000 due runs
  wait in full groups (100 groups of 100, each with its 2 slots taken by another runner);
- grouped, nothing waiting: a grouped workflow's run in a free group (lock + CLAIM_GROUPED);
- grouped, 10k held back: the same, with 10,000 older runs held back in full groups (they came
  due first; the first claims set them aside, see below, then autovacuum's VACUUM ANALYZE);
- grouped, finding nothing: only the 10,000 held-back runs wait: what a poked runner pays to
  learn it can take nothing;
- next wake, nothing waiting / 10k held back: the idle runner's read of its schedule (it must not
  see the held-back runs as due, or it would claim in a loop);
- ungrouped, 10k due of 3 workflows: a runner fallen behind, claiming one run at a time from
  10,000 due runs of its 3 ungrouped workflows (each claimed run completed, untimed).

It prints median and p99 (ms) and the SQL statements per call, BEGIN and COMMIT included (as
Django's query log counts them; on PostgreSQL the ungrouped claim sends its two, its plan setting
and the claim, in one round trip). Its databases are created and dropped by each run: SQLite
`var/bench/bench.sqlite3`, PostgreSQL `bench_claims` (`BENCH_PG_DATABASE`).

    .venv/bin/python bench/claims.py [--db sqlite|postgres|both] [--held 10000] [--samples 300] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Its own PostgreSQL database, as bench/prune.py and bench/side_by_side.py have theirs.
os.environ.setdefault("BENCH_PG_DATABASE", "bench_claims")

from bench._common import BENCH_VAR, database_url, progress, stats_ms  # noqa: E402
from bench._db import create_database, drop_database  # noqa: E402

GROUPS = 100  # the held-back runs are spread over this many full groups
MAX = 2  # Concurrency(max=...) of the grouped workflow
SCENARIOS = (
    "ungrouped, nothing waiting",
    "ungrouped, {held} held back",
    "grouped, nothing waiting",
    "grouped, {held} held back",
    "grouped, finding nothing",
    "next wake, nothing waiting",
    "next wake, {held} held back",
    "ungrouped, {held} due of 3 workflows",
    "the same, the claim before (one sorted read)",
)
BACKLOG_WORKFLOWS = ["due-a", "due-b", "due-c"]


def _env(db: str) -> dict[str, str]:
    """The measuring child's environment: no registry and quiet logs (unlike bench_env)."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": database_url(db),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


# --- in the measuring child ------------------------------------------------------------------------


class Bench:
    def __init__(self, held: int, samples: int) -> None:
        from workflows.storage.django import DjangoStore

        self.store = DjangoStore()
        self.held, self.samples = held, samples
        self.owner = f"bench-{uuid.uuid4().hex[:8]}"
        self.n = 0

    def _start(self, workflow: str, group: str | None) -> None:
        from django.utils import timezone

        from workflows.core.new_run import NewRun

        self.n += 1
        self.store.get_or_create_run(NewRun(workflow=workflow, key=[f"{self.owner}-{self.n}"], version="", initial_state={}, now=timezone.now(), concurrency_group=group))  # fmt: skip

    def _finish(self, run_ids: list[str]) -> None:
        from workflows.models import Run

        Run.objects.filter(id__in=run_ids).update(status="completed", wake_at=None, lease_owner="")

    def claim(self, workflows: list[str], caps: dict[str, int], start: str | None, group: str | None):
        """Per sample: start a run of `start` (untimed), claim one (timed), complete it (untimed)."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        seconds, statements = [], []
        for i in range(self.samples + 10):  # the first 10 warm up
            if start is not None:
                self._start(start, f"{group}-{self.n}" if group else None)
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                runs = self.store.claim(
                    owner=self.owner, workflows=workflows, limit=1, lease_seconds=60, now=timezone.now(),
                    concurrency=caps,
                )  # fmt: skip
                took = time.perf_counter() - began
            if len(runs) != (0 if start is None else 1):
                raise SystemExit(f"claimed {len(runs)} run(s), expected {0 if start is None else 1}")
            self._finish([r.id for r in runs])
            if i >= 10:
                seconds.append(took)
                statements.append(len(queries.captured_queries))
        return {**stats_ms(seconds), "statements": max(statements)}

    def claim_from_backlog(self) -> dict[str, dict]:
        """`held` due runs of 3 ungrouped workflows (bulk-written, analyzed): one claim taken from
        them at a time, completed untimed, what a runner pays when it has fallen behind; as the
        store claims now and as it claimed before (`bench/_claim_before.py`), alternately."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        from workflows.core.keys import key_identity
        from workflows.models import Run

        now = timezone.now()
        rows = []
        for i in range(self.held):
            key = ["due", str(i)]
            text, digest = key_identity(key)
            run = Run(
                workflow=BACKLOG_WORKFLOWS[i % 3], key=key, key_text=text, key_hash=digest, version="",
                status="pending", state={}, created_at=now, updated_at=now, transitioned_at=now,
                wake_at=now - dt.timedelta(hours=1) + dt.timedelta(microseconds=i),
            )  # fmt: skip
            rows.append(run)
        Run.objects.bulk_create(rows, batch_size=1000)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE" if connection.vendor == "sqlite" else "ANALYZE workflows_run")
        from bench._claim_before import pick_before, send_as_before
        from workflows.storage.django.statements import shared

        def now_(at: dt.datetime) -> list[str]:
            runs = self.store.claim(
                owner=self.owner, workflows=BACKLOG_WORKFLOWS, limit=1, lease_seconds=60, now=at
            )
            return [r.id for r in runs]

        def before(at: dt.datetime) -> list[str]:
            lease = shared.claim_lease(self.owner, at + dt.timedelta(seconds=60), at)
            return [str(row[0]) for row in send_as_before(pick_before(BACKLOG_WORKFLOWS, 1, at), lease)]

        ways = {"now": now_, "before": before}
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        statements: dict[str, list[int]] = {way: [] for way in ways}
        for i in range(2 * (self.samples + 10)):
            way = "now" if i % 2 == 0 else "before"
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                claimed = ways[way](timezone.now())
                took = time.perf_counter() - began
            if len(claimed) != 1:
                raise SystemExit(f"claimed {len(claimed)} run(s) from a backlog of {self.held}, expected 1")
            self._finish(claimed)
            if i >= 20:
                seconds[way].append(took)
                statements[way].append(len(queries.captured_queries))
        return {way: {**stats_ms(seconds[way]), "statements": max(statements[way])} for way in ways}

    def next_wake(self, workflows: list[str], caps: dict[str, int]):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext
        from django.utils import timezone

        seconds, statements = [], []
        for i in range(self.samples + 10):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                when = self.store.next_wake_at(owner=self.owner, workflows=workflows, concurrency=caps)
                took = time.perf_counter() - began
            if when is not None and when <= timezone.now():  # the held-back runs must not look due
                raise SystemExit(f"next_wake_at answered {when}: the held-back runs look due")
            if i >= 10:
                seconds.append(took)
                statements.append(len(queries.captured_queries))
        return {**stats_ms(seconds), "statements": max(statements)}

    def hold_back(self) -> None:
        """`held` due runs of the grouped workflow in GROUPS full groups (their MAX slots taken by
        another runner's live leases), written in bulk."""
        from django.db import connection
        from django.utils import timezone

        from workflows.core.keys import key_identity
        from workflows.models import Run

        now = timezone.now()
        rows = []

        def row(i: int, group: int, status: str, wake: dt.datetime, owner: str) -> Run:
            key = [f"held-{group}", str(i)]
            text, digest = key_identity(key)
            return Run(
                workflow="grouped", key=key, key_text=text, key_hash=digest, version="", status=status,
                state={}, created_at=now - dt.timedelta(hours=1), updated_at=now, transitioned_at=now,
                wake_at=wake, lease_owner=owner, concurrency_group=f"grouped/held-{group}",
            )  # fmt: skip

        for g in range(GROUPS):
            for s in range(MAX):
                rows.append(row(-1 - s, g, "running", now + dt.timedelta(hours=1), "another-runner"))
        for i in range(self.held):
            rows.append(
                row(i, i % GROUPS, "pending", now - dt.timedelta(hours=1) + dt.timedelta(microseconds=i), "")
            )
        Run.objects.bulk_create(rows, batch_size=1000)
        # The held-back runs arrived due: the first claims set them aside (PARK_BATCH per claim).
        began, claims = time.perf_counter(), 0
        while Run.objects.filter(workflow="grouped", status="pending", wake_at__isnull=False).exists():
            self.store.claim(
                owner=self.owner, workflows=["grouped"], limit=1, lease_seconds=60, now=timezone.now(),
                concurrency={"grouped": MAX},
            )  # fmt: skip
            claims += 1
        self.set_aside = {"seconds": time.perf_counter() - began, "claims": claims}
        progress(f"set {self.held:,} runs aside in {claims} claims, {self.set_aside['seconds']:.2f}s")
        with connection.cursor() as cursor:  # what autovacuum does after such a wave of updates
            cursor.execute("ANALYZE" if connection.vendor == "sqlite" else "VACUUM ANALYZE workflows_run")


def child(db: str, held: int, samples: int, out: Path) -> None:
    os.environ["DATABASE_URL"] = database_url(db)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    bench = Bench(held, samples)
    plain, grouped = ["plain"], ["grouped"]
    both, caps = ["grouped", "plain"], {"grouped": MAX}
    figures = {}
    progress(f"{db}: nothing waiting")
    figures["ungrouped, nothing waiting"] = bench.claim(plain, {}, "plain", None)
    figures["grouped, nothing waiting"] = bench.claim(grouped, caps, "grouped", "grouped/free")
    figures["next wake, nothing waiting"] = bench.next_wake(both, caps)
    progress(f"{db}: holding back {held:,} runs in {GROUPS} full groups")
    bench.hold_back()
    figures["ungrouped, {held} held back"] = bench.claim(both, caps, "plain", None)
    figures["grouped, {held} held back"] = bench.claim(grouped, caps, "grouped", "grouped/free")
    figures["grouped, finding nothing"] = bench.claim(grouped, caps, None, None)
    figures["next wake, {held} held back"] = bench.next_wake(both, caps)
    figures["set aside once"] = bench.set_aside
    progress(f"{db}: {held:,} due runs of 3 workflows")
    backlog = bench.claim_from_backlog()
    figures["ungrouped, {held} due of 3 workflows"] = backlog["now"]
    figures["the same, the claim before (one sorted read)"] = backlog["before"]
    out.write_text(json.dumps(figures))


# --- the parent -----------------------------------------------------------------------------------


def report(results: dict[str, dict], held: int, samples: int) -> None:
    dbs = list(results)
    print()
    print(
        f"bench/claims.py: one claim (limit 1), {samples} samples each; {held:,} runs held back in {GROUPS} full groups of max {MAX}"
    )
    header = "".join(f" {db + ' median':>16} {'p99':>9} {'stmts':>6}" for db in dbs)
    print(f"  {'situation':<46}{header}")
    for name in SCENARIOS:
        cells = ""
        for db in dbs:
            f = results[db][name]
            cells += f" {f['median_ms']:>14.2f}ms {f['p99_ms']:>7.2f}ms {f['statements']:>6}"
        print(f"  {name.format(held=f'{held:,}'):<46}{cells}")
    for db in dbs:
        once = results[db]["set aside once"]
        print(
            f"  {db}: the {held:,} runs arrived due; the first {once['claims']} claims set them aside in {once['seconds']:.2f}s"
        )
    print(f"  load average (1 min) at the end: {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--held", type=int, default=10_000, help="runs held back in full groups (default 10,000)"
    )
    parser.add_argument("--samples", type=int, default=300, help="claims timed per situation (default 300)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.held, args.samples, args.out)
        return 0
    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = {}
    for db in dbs:
        create_database(db)
        try:
            out = BENCH_VAR / f"claims-{db}.json"
            BENCH_VAR.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, __file__, "--child", db, "--held", str(args.held), "--samples", str(args.samples),
                 "--out", str(out)],
                cwd=ROOT, env=_env(db), check=True,
            )  # fmt: skip
            results[db] = json.loads(out.read_text())
            out.unlink()
        finally:
            drop_database(db)
    report(results, args.held, args.samples)
    if args.json:
        args.json.write_text(
            json.dumps({"held": args.held, "samples": args.samples, "figures": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
