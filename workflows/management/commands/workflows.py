"""`python manage.py workflows <sub>`: operators' commands. Thin: parse, call the operations and
reads the admin and the API use, print. Repairs are audited with the actor `cli:<os user>`.

    workflows apikey create NAME | apikey revoke NAME
    workflows list [--status S] [--workflow W] [--limit N] [--cursor C]
    workflows show RUN_ID
    workflows replay RUN_ID --entry ID --reason WHY [--input JSON] [--wait-for-new]
    workflows fork RUN_ID --entry ID --reason WHY [--key KEY] [--input JSON]
    workflows retry-now RUN_ID --entry ID --reason WHY
    workflows cancel RUN_ID --reason WHY
    workflows pause|resume (RUN_ID | --workflow NAME) --reason WHY
    workflows paused
    workflows send RUN_ID QUEUE --body JSON --reason WHY
    workflows schedules
    workflows schedule pause|resume NAME --reason WHY
    workflows doctor [--fix] [--json] [--limit N]
    workflows bulk cancel|replay|retry-now [--workflow W] [--status S]... [--version V] [--error TEXT]
                   [--created-after T] [--created-before T] [--concurrency-group G]
                   (--dry-run | --reason WHY [--yes] [--background])
    workflows bulk-status OP_ID | bulk-abort OP_ID [--reason WHY]
"""

from __future__ import annotations

import getpass
import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from workflows import conf, operations
from workflows.bulk import control as bulk_control
from workflows.core.durations import format_duration
from workflows.core.exceptions import WorkflowError
from workflows.core.records import RunStatus
from workflows.http.auth import create_api_key, revoke_api_key
from workflows.http.parser import parse_json
from workflows.management import bulk_output
from workflows.management.doctor_output import DOCTOR_HELP, add_doctor_arguments, doctor
from workflows.masking import mask, mask_text
from workflows.reads import runs as run_reads


def _json(text: str, what: str) -> Any:
    try:
        return parse_json(text)
    except ValueError as exc:  # not JSON, or nested too deep (JsonTooDeep)
        raise CommandError(f"{what} is not JSON: {exc}") from None


def _actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        user = f"uid{os.getuid()}"
    return f"cli:{user}"


def _when(value) -> str:
    return value.isoformat(timespec="seconds") if value else "-"


class Command(BaseCommand):
    help = (
        "Operate workflow runs: API keys, list, show, replay, fork, retry-now, cancel, pause, resume, send;"
        " schedules;"
        " doctor; bulk actions by filter."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="sub", required=True, metavar="SUBCOMMAND")

        apikey = sub.add_parser("apikey", help="Create or revoke an API key for /api/.")
        apikey_sub = apikey.add_subparsers(dest="apikey_action", required=True)
        apikey_sub.add_parser("create", help="Create a key; it is printed once.").add_argument("name")
        apikey_sub.add_parser("revoke", help="Refuse the key from now on.").add_argument("name")

        ls = sub.add_parser("list", help="Runs, newest first.")
        ls.add_argument("--status", choices=[s.value for s in RunStatus])
        ls.add_argument("--workflow")
        ls.add_argument("--limit", type=int, default=50, help=f"At most {run_reads.MAX_PAGE}.")
        ls.add_argument("--cursor", help="The next-page cursor printed by a previous list.")

        sub.add_parser("show", help="One run with its steps and attempts.").add_argument("run_id")

        replay = sub.add_parser("replay", help="Run a run again from a step.")
        replay.add_argument("run_id")
        replay.add_argument("--entry", type=int, required=True, help="The entry id (see `show`).")
        replay.add_argument("--reason", required=True)
        replay.add_argument("--input", help="JSON: rerun the step with this input instead of its own.")
        replay.add_argument(
            "--wait-for-new",
            action="store_true",
            help="Do not deliver again the messages the superseded waits consumed: they wait for new ones.",
        )

        fork = sub.add_parser("fork", help="Start a new run from a run's history up to an entry.")
        fork.add_argument("run_id")
        fork.add_argument(
            "--entry", type=int, required=True, help="The root entry it runs fresh from (see `show`)."
        )
        fork.add_argument("--reason", required=True)
        fork.add_argument(
            "--key",
            help='The new run\'s key: a JSON list (["a", "b"]) or one string; default <key>~fork-<n>.',
        )
        fork.add_argument("--input", help="JSON: the entry (a step) runs with this input instead of its own.")

        retry = sub.add_parser("retry-now", help="Retry a step now instead of waiting out its backoff.")
        retry.add_argument("run_id")
        retry.add_argument("--entry", type=int, required=True)
        retry.add_argument("--reason", required=True)

        cancel = sub.add_parser("cancel", help="Cancel a run.")
        cancel.add_argument("run_id")
        cancel.add_argument("--reason", required=True)

        for verb, what in (("pause", "Pause"), ("resume", "Resume")):
            action = sub.add_parser(verb, help=f"{what} a run, or a whole workflow (--workflow).")
            action.add_argument("run_id", nargs="?")
            action.add_argument("--workflow", help=f"{what} every run of this workflow instead of one run.")
            action.add_argument("--reason", required=True)
        sub.add_parser("paused", help="Paused workflows, and how many runs are paused one by one.")

        send = sub.add_parser("send", help="Send a message (e.g. an approval) to a run's queue.")
        send.add_argument("run_id")
        send.add_argument("queue")
        send.add_argument("--body", required=True, help="JSON.")
        send.add_argument("--reason", required=True)

        sub.add_parser("schedules", help="Cron schedules: state, next and last fire.")
        sched = sub.add_parser("schedule", help="Pause or resume a schedule.")
        sched.add_argument("schedule_action", choices=["pause", "resume"])
        sched.add_argument("name")
        sched.add_argument("--reason", required=True)

        add_doctor_arguments(sub.add_parser("doctor", help=DOCTOR_HELP, description=DOCTOR_HELP))
        bulk_output.add_bulk_arguments(sub)

    def handle(self, *args, sub: str, **options):
        handler = getattr(self, f"do_{sub.replace('-', '_')}")
        try:
            handler(**options)
        except WorkflowError as exc:
            raise CommandError(str(exc)) from None

    # --- subcommands -------------------------------------------------------------------------------

    def do_apikey(self, *, apikey_action: str, name: str, **_):
        if apikey_action == "create":
            row, key = create_api_key(name)
            self.stdout.write(f"API key {row.name!r} created. It is shown only this once:\n{key}")
        else:
            row = revoke_api_key(name)
            self.stdout.write(f"API key {row.name!r} ({row.prefix}…) revoked.")

    def do_list(self, *, status, workflow, limit, cursor, **_):
        if not 1 <= limit <= run_reads.MAX_PAGE:
            raise CommandError(f"--limit must be between 1 and {run_reads.MAX_PAGE}")
        page = run_reads.run_list(status=status, workflow=workflow, cursor=cursor, limit=limit)
        for run in page.items:
            self.stdout.write(
                f"{run.id}  {run.status:<9}  {run.workflow}  {json.dumps(run.key)}  {_when(run.created_at)}"
            )
        if page.next_cursor:
            self.stdout.write(f"more: --cursor {page.next_cursor}")

    def do_show(self, *, run_id, **_):
        run = run_reads.run_detail(run_id)
        w = self.stdout.write
        w(f"run {run.id}: {run.workflow} {json.dumps(run.key)} version {run.version or '-'}")
        w(f"status {run.status}; created {_when(run.created_at)}; finished {_when(run.finished_at)}")
        w(f"state {json.dumps(mask(run.state))}")  # masked as in the inspector and the API
        if run.result is not None:
            w(f"result {json.dumps(mask(run.result))}")
        if run.error:
            w(f"error {run.error.get('name')}: {mask_text(str(run.error.get('message')))}")
        for entry in run.entries.all():
            flag = " (superseded)" if entry.superseded else ""
            where = f"{entry.scope}/" if entry.scope else ""
            w(f"  #{entry.id} {where}{entry.position} {entry.kind} {entry.name}: {entry.status}{flag}")
            for attempt in entry.attempt_history():
                line = f"      attempt {attempt.number}: {attempt.outcome} at {_when(attempt.started_at)}"
                if attempt.error:
                    line += f" - {attempt.error.get('name')}: {mask_text(str(attempt.error.get('message')))}"
                if attempt.delay is not None:
                    line += f" (next in {format_duration(attempt.delay)})"
                w(line)

    def do_replay(self, *, run_id, entry, reason, input, wait_for_new=False, **_):
        edit = input is not None
        value = _json(input, "--input") if edit else None
        run = operations.replay_from(
            run_id, entry, actor=_actor(), reason=reason, input=value, edit_input=edit,
            redeliver=not wait_for_new,
        )  # fmt: skip
        self.stdout.write(f"run {run.id} replays from entry {entry}; it is {run.status}.")

    def do_fork(self, *, run_id, entry, reason, key, input, **_):
        edit = input is not None
        value = _json(input, "--input") if edit else None
        new_key = None if key is None else (_json(key, "--key") if key.lstrip().startswith("[") else [key])
        fork = operations.fork_run(
            run_id, entry, actor=_actor(), reason=reason, key=new_key, input=value, edit_input=edit
        )
        self.stdout.write(str(fork.id))  # alone on its line, for scripts
        self.stdout.write(
            f"forked from run {run_id} at entry {entry} as {json.dumps(fork.key)}; it is {fork.status}."
        )

    def do_retry_now(self, *, run_id, entry, reason, **_):
        operations.retry_now(run_id, entry, actor=_actor(), reason=reason)
        self.stdout.write(f"entry {entry} of run {run_id} is due now.")

    def do_cancel(self, *, run_id, reason, **_):
        run = operations.cancel(run_id, actor=_actor(), reason=reason)
        self.stdout.write(f"run {run.id} is {run.status} (cancel requested).")

    def do_pause(self, *, run_id, workflow, reason, **_):
        if _one_of(run_id, workflow) == "workflow":
            row = operations.pause_workflow(workflow, actor=_actor(), reason=reason)
            self.stdout.write(f"workflow {row.workflow!r} is paused: no run of it is claimed until resumed.")
            return
        run = operations.pause_run(run_id, actor=_actor(), reason=reason)
        after = "paused" if run.status == RunStatus.PAUSED else f"{run.status} (pauses at its next entry)"
        self.stdout.write(f"run {run.id} is {after}.")

    def do_resume(self, *, run_id, workflow, reason, **_):
        if _one_of(run_id, workflow) == "workflow":
            row = operations.resume_workflow(workflow, actor=_actor(), reason=reason)
            self.stdout.write(f"workflow {row.workflow!r} is resumed: its runs are claimed again.")
            return
        run = operations.resume_run(run_id, actor=_actor(), reason=reason)
        self.stdout.write(f"run {run.id} is {run.status}.")

    def do_paused(self, **_):
        rows = operations.paused_workflows()
        for row in rows:
            self.stdout.write(
                f"{row.workflow}  since {_when(row.paused_at)}  by {row.actor}  ({row.reason or 'no reason'})"
                f"  {row.paused_runs} run(s) paused one by one"
            )
        if not rows:
            self.stdout.write("no workflow is paused.")
        self.stdout.write("runs paused one by one: workflows list --status paused")

    def do_send(self, *, run_id, queue, body, reason, **_):
        message_id = operations.send(
            run_id, queue, _json(body, "--body"), registry=conf.registry(), actor=_actor(), reason=reason
        )
        self.stdout.write(f"message {message_id} sent to {queue!r} of run {run_id}.")

    def do_schedules(self, **_):
        for row in conf.default_store().list_schedules():
            state = "gone" if row.gone else "paused" if row.paused else "active"
            self.stdout.write(
                f"{row.name}  {state:<6}  {row.workflow}  {row.cron!r} {row.timezone}  catch_up {row.catch_up}"
                f"  next {_when(row.next_fire_at) if state == 'active' else '-'}  last {_when(row.last_fire_at)}"
            )

    def do_doctor(self, *, fix: bool, json_output: bool, limit: int, **_):
        if not 1 <= limit <= 1000:
            raise CommandError("--limit must be between 1 and 1000")
        clean = doctor(self.stdout, fix=fix, as_json=json_output, limit=limit, actor=_actor())
        if not clean:
            raise SystemExit(1)

    def do_schedule(self, *, schedule_action, name, reason, **_):
        row = operations.pause_schedule(
            name, paused=schedule_action == "pause", actor=_actor(), reason=reason
        )
        after = "paused" if row.paused else f"active, next fire {_when(row.next_fire_at)}"
        self.stdout.write(f"schedule {row.name!r} is {after}.")

    def do_bulk(self, **options):
        bulk_output.bulk(self.stdout, options=options, actor=_actor(), confirm=_confirm)

    def do_bulk_status(self, *, op_id, **_):
        bulk_output.write_status(self.stdout, bulk_control.get(op_id))

    def do_bulk_abort(self, *, op_id, reason, **_):
        op = bulk_control.abort(op_id, actor=_actor(), reason=reason)
        after = "aborted" if op.finished else "stops after its current batch"
        self.stdout.write(f"bulk operation {op.id} {after}.")


def _one_of(run_id: str | None, workflow: str | None) -> str:
    """What pause and resume act on: "run" or "workflow", exactly one of them named."""
    if (run_id is None) == (workflow is None):
        raise CommandError("name either a RUN_ID or --workflow NAME")
    return "run" if workflow is None else "workflow"


def _confirm(question: str) -> bool:
    try:
        return input(question).strip().lower() == "yes"
    except EOFError:  # no terminal: never taken as a yes
        return False
