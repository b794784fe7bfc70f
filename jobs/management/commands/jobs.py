"""`python manage.py jobs submit …` starts an AI job (and follows it); `jobs status ID` shows one."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError

from jobs.follow import describe
from jobs.follow import follow as follow_job
from jobs.schemas import JobStart
from jobs.submission import job_submit, jobs_client
from workflows import BadInput, RunNotFound, RunStatus


class Command(BaseCommand):
    help = "Start an AI job from a transcript file and follow it, or show a job's status."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        submit = sub.add_parser("submit", help="Start a job.")
        submit.add_argument("--title", required=True)
        submit.add_argument("--transcript-file", required=True, help="A text file, or - for stdin.")
        submit.add_argument("--follow", action="store_true", help="Print its progress until it ends.")
        submit.add_argument("--idempotency-key", help="The same key starts the job once.")
        submit.add_argument("--timeout", type=float, help="Stop following after this many seconds.")
        status = sub.add_parser("status", help="Show one job.")
        status.add_argument("job_id")

    def handle(self, *args, action: str, **options):
        if action == "submit":
            return self._submit(**options)
        return self._status(options["job_id"])

    def _submit(self, *, title, transcript_file, follow: bool, idempotency_key, timeout, **options):
        try:
            source = sys.stdin if transcript_file == "-" else Path(transcript_file).open(encoding="utf-8")
            with source:
                transcript = source.read()
            job = JobStart.model_validate({"title": title, "transcript": transcript})
            submitted = job_submit(job.model_dump(), idempotency_key=idempotency_key)
        except OSError as exc:
            raise CommandError(f"cannot read the transcript: {exc}") from None
        except ValidationError as exc:
            raise CommandError(f"invalid job: {exc}") from None
        except BadInput as exc:
            raise CommandError(str(exc)) from None
        handle = jobs_client().get([submitted.job_id])
        again = "" if submitted.created else " (already submitted with this Idempotency-Key)"
        self.stdout.write(f"job {submitted.job_id}{again}  run {handle.run_id}")
        if not follow:
            return
        try:
            run = follow_job(handle, self.stdout, timeout=timeout)
        except TimeoutError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write("final state:\n" + describe(submitted.job_id, run))
        if run.status != RunStatus.COMPLETED:
            raise CommandError(f"job {submitted.job_id} ended {run.status}: {run.state.get('error')}")

    def _status(self, job_id: str):
        try:
            handle = jobs_client().get([job_id])
        except RunNotFound:
            raise CommandError(f"no job {job_id}") from None
        self.stdout.write(describe(job_id, handle.snapshot))
