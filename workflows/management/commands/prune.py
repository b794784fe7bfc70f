"""`python manage.py prune [--dry-run]`: delete finished runs past WORKFLOWS["RETENTION"] now.

The runner does the same every WORKFLOWS["PRUNE_SECONDS"] on its own; this command is for a
first clean-up, a check of what the policy would delete (`--dry-run`), or deployments that
prefer their own schedule.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows import conf
from workflows.core.retention import PRUNABLE
from workflows.storage.django.prune import PruneReport, due_runs, prune


class Command(BaseCommand):
    help = "Delete finished runs (with their history) older than WORKFLOWS['RETENTION'] allows."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would be deleted; delete nothing."
        )
        parser.add_argument(
            "--batch", type=int, default=None, help="Runs per transaction (default WORKFLOWS['PRUNE_BATCH'])."
        )
        parser.add_argument("--max-batches", type=int, default=None, help="Stop after this many batches.")
        parser.add_argument(
            "--list",
            type=int,
            default=20,
            dest="list_runs",
            help="With --dry-run: list this many runs (default 20).",
        )

    def handle(
        self,
        *args: Any,
        dry_run: bool,
        batch: int | None,
        max_batches: int | None,
        list_runs: int,
        **options: Any,
    ) -> None:
        try:
            retention = conf.retention()
        except ValueError as exc:
            raise CommandError(f'WORKFLOWS["RETENTION"] {exc}') from None
        batch = conf.prune_batch() if batch is None else batch
        if batch < 1 or (max_batches is not None and max_batches < 1) or list_runs < 0:
            raise CommandError("--batch and --max-batches must be >= 1, --list >= 0")
        for status in PRUNABLE:
            self.stdout.write(retention.describe(status))
        self.stdout.write(retention.describe_audited())
        if not retention.enabled:
            self.stdout.write('WORKFLOWS["RETENTION"] prunes no status: nothing to do.')
            return
        verbose = options["verbosity"] >= 2

        def progress(report: PruneReport) -> None:
            if verbose:
                self.stdout.write(f"  batch {report.batches}: {report.total_runs} run(s) so far")

        report = prune(
            retention, batch_size=batch, dry_run=dry_run, max_batches=max_batches, on_batch=progress
        )
        for line in report.lines():
            self.stdout.write(line)
        if dry_run and list_runs and report.total_runs:
            rows = due_runs(retention, limit=list_runs)
            for run_id, workflow, run_status, finished_at in rows:
                self.stdout.write(
                    f"  {run_id}  {run_status:<9}  {workflow}  finished {finished_at:%Y-%m-%d %H:%M}"
                )
            if report.total_runs > len(rows):
                self.stdout.write(f"  ... and {report.total_runs - len(rows)} more")
