"""`python manage.py checkreplay`: before a deploy, replay the histories of live runs against the
code checked out here and list every run that would diverge. Exits 1 when any would."""

import asyncio
import json

from django.core.management.base import BaseCommand, CommandError

from workflows import conf
from workflows.core.records import TERMINAL
from workflows.engine.replayer import Replayer
from workflows.models import Run
from workflows.storage.django.rows import run_record

BATCH = 200  # runs loaded per query


class Command(BaseCommand):
    help = "Replay stored histories of live runs against the current code; report divergences."

    def add_arguments(self, parser):
        parser.add_argument("--workflow", help="Only runs of this workflow.")
        parser.add_argument("--all", action="store_true", help="Finished runs too, not only live ones.")
        parser.add_argument("--json", action="store_true", help="One JSON object per run checked.")

    def handle(self, *args, workflow=None, all=False, json=False, **options):
        runs = Run.objects.order_by("created_at", "id")
        if not all:
            runs = runs.exclude(status__in=TERMINAL)
        if workflow:
            runs = runs.filter(workflow=workflow)
        store, replayer = conf.default_store(), Replayer(conf.registry())
        checked = diverged = 0
        for run in runs.iterator(chunk_size=BATCH):
            record = run_record(run)
            report = asyncio.run(replayer.check(record, store.load_history(record.id)))
            checked += 1
            diverged += report.diverged
            if json:
                self.stdout.write(_json(report))
            elif report.diverged:
                self.stdout.write(f"DIVERGED {report.workflow} {report.run_id}: {report.detail}")
            elif options["verbosity"] > 1:
                self.stdout.write(f"ok       {report.workflow} {report.run_id}: {report.detail}")
        if not json:
            self.stdout.write(f"{checked} run(s) checked, {diverged} would diverge")
        if diverged:
            raise CommandError(f"{diverged} run(s) would diverge with this code", returncode=1)


def _json(report) -> str:
    return json.dumps(
        {
            "run_id": report.run_id,
            "workflow": report.workflow,
            "diverged": report.diverged,
            "detail": report.detail,
        }
    )
