"""`manage.py workflows bulk | bulk-status | bulk-abort`: a bulk action by filter from the
command line. A dry run prints the count and a sample; otherwise the count is confirmed (typed
`yes`, or `--yes`), the operation is started and, unless `--background` leaves it to the
runners, executed right here with a progress line per batch. Thin over `workflows.bulk.control`
and `workflows.bulk.executor`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from django.core.management.base import CommandError

from workflows.bulk import control, executor
from workflows.bulk.actions import ACTIONS
from workflows.core.records import RunStatus
from workflows.models import BulkOperation

BULK_HELP = (
    "Act on every run a filter matches: cancel, replay (from the failed step), retry-now, pause or resume, as a"
    " tracked operation. --dry-run prints the count and a sample; otherwise the count is confirmed"
    " (or --yes) and the operation runs here with its progress (or, with --background, on a runner)."
)


class Output(Protocol):
    def write(self, text: str) -> Any: ...


def add_bulk_arguments(sub: Any) -> None:
    bulk = sub.add_parser("bulk", help=BULK_HELP, description=BULK_HELP)
    bulk.add_argument("action", choices=[a.replace("_", "-") for a in ACTIONS])
    bulk.add_argument("--workflow")
    bulk.add_argument(
        "--status", action="append", choices=[s.value for s in RunStatus], help="Repeatable: any of them."
    )
    bulk.add_argument("--version")
    bulk.add_argument("--error", help="Text contained in the run's last error (name or message), any case.")
    bulk.add_argument("--created-after", help="ISO 8601 (UTC when no offset is given).")
    bulk.add_argument("--created-before", help="ISO 8601.")
    bulk.add_argument("--concurrency-group")
    bulk.add_argument("--dry-run", action="store_true", help="Print the count and a sample; change nothing.")
    bulk.add_argument("--reason", help="Why: kept with the operation and in each run's audit log.")
    bulk.add_argument("--yes", action="store_true", help="Do not ask to confirm the count.")
    bulk.add_argument("--background", action="store_true", help="Start it and leave it to the runners.")

    sub.add_parser("bulk-status", help="A bulk operation's progress and skipped runs.").add_argument("op_id")
    abort = sub.add_parser("bulk-abort", help="Stop a bulk operation after its current batch.")
    abort.add_argument("op_id")
    abort.add_argument("--reason", default="")


def bulk(
    out: Output, *, options: dict[str, Any], actor: str, confirm: Callable[[str], bool]
) -> BulkOperation | None:
    """Preview; unless a dry run, confirm the count, start, and execute (or leave it to runners)."""
    action = options["action"].replace("-", "_")
    filter = {
        "workflow": options.get("workflow"),
        "status": options.get("status"),
        "version": options.get("version"),
        "error": options.get("error"),
        "created_after": options.get("created_after"),
        "created_before": options.get("created_before"),
        "concurrency_group": options.get("concurrency_group"),
    }
    if not options.get("dry_run") and not options.get("reason"):
        raise CommandError("--reason is required (it is kept in each run's audit log); or use --dry-run")
    preview = control.preview(action, filter)
    out.write(
        f"{preview.action.label}: {preview.count} run(s) of {preview.matched} matching {json.dumps(preview.filter.to_dict())}"
    )
    for run in preview.sample:
        out.write(f"  {run.id}  {run.status:<9}  {run.workflow}  {json.dumps(run.key)}")
    if preview.count > len(preview.sample):
        out.write(f"  … and {preview.count - len(preview.sample)} more")
    if options.get("dry_run") or preview.count == 0:
        if preview.count == 0:
            out.write("Nothing to do: no run matches that the action applies to.")
        return None
    if not options.get("yes") and not confirm(f"{preview.action.label} {preview.count} run(s)? Type yes: "):
        raise CommandError("not confirmed: nothing was changed")
    op = control.start(action, filter, actor=actor, reason=options["reason"], expected_count=preview.count)
    out.write(f"bulk operation {op.id} started on {op.total} run(s).")
    if options.get("background"):
        out.write(f"the runners execute it; follow it with `manage.py workflows bulk-status {op.id}`.")
        return op
    owner = executor.executor_id("cli")
    if executor.claim(owner, op_id=op.id) is None:  # a runner took it first: it goes on there
        out.write(f"a runner is executing it; follow it with `manage.py workflows bulk-status {op.id}`.")
        return op
    op = executor.execute(op.id, owner, progress=lambda p: out.write(progress_line(p)))
    write_status(out, op)
    return op


def progress_line(op: BulkOperation) -> str:
    return (
        f"  {op.processed}/{op.total}: {op.done} done, {op.skipped} skipped, {op.failed} failed ({op.status})"
    )


def write_status(out: Output, op: BulkOperation) -> None:
    out.write(
        f"bulk operation {op.id}: {op.action} by {op.actor} ({op.reason or 'no reason'}) is {op.status}; "
        f"{op.processed}/{op.total} processed: {op.done} done, {op.skipped} skipped, {op.failed} failed"
    )
    if op.abort_requested:
        out.write(f"abort requested by {op.aborted_by}{f' ({op.abort_reason})' if op.abort_reason else ''}")
    for target in control.skipped_runs(op):
        out.write(f"  {target.run_id}  {target.outcome}: {target.reason}")
