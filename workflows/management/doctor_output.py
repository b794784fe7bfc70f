"""`manage.py workflows doctor`: the findings as a table for people or JSON for machines, and
with `--fix` what was repaired and what is left for a person. The checks are
`workflows.reads.doctor`'s, the repairs `workflows.doctor`'s."""

from __future__ import annotations

import json
from typing import Any, Protocol

from workflows import doctor as repairs
from workflows.reads import doctor as checks


class Output(Protocol):
    def write(self, text: str) -> Any: ...


DOCTOR_HELP = (
    "Find what is stuck: runs no live runner serves, leases of dead runners, runs set aside in a"
    " concurrency group and never put back, limiter slots never released, messages to finished runs,"
    " schedules whose next fire is past, parents waiting on a finished child, runs of a version no"
    " deployed code has. --fix repairs what is safe (audited) and says what it leaves for a person."
    " Exit status: 0 when nothing is found (after --fix: nothing remains), 1 when findings remain."
)


def add_doctor_arguments(parser: Any) -> None:
    parser.add_argument("--fix", action="store_true", help="Repair what is safe to repair, audited.")
    parser.add_argument("--json", dest="json_output", action="store_true", help="Print JSON, for machines.")
    parser.add_argument(
        "--limit",
        type=int,
        default=checks.SAMPLE,
        help=f"Run ids shown per finding (default {checks.SAMPLE}).",
    )


def doctor(out: Output, *, fix: bool, as_json: bool, limit: int, actor: str) -> bool:
    """Examine (and repair); print; True when nothing is left."""
    found = checks.examine(checks.situation(sample=limit))
    done: list[repairs.Repair] = []
    remaining = found
    if fix and found:
        done = repairs.fix(found, checks.situation(sample=limit), actor=actor)
        remaining = checks.examine(checks.situation(sample=limit))
    if as_json:
        out.write(json.dumps(_as_json(found, done, remaining, fixed=fix), indent=2))
    else:
        _print_table(out, found if not fix else remaining, done)
    return not remaining


def _as_json(found, done, remaining, *, fixed: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "clean": not remaining,
        "findings": [f.as_dict() for f in (remaining if fixed else found)],
    }
    if fixed:
        body["repairs"] = [{"kind": r.kind, "repaired": r.repaired, "note": r.note} for r in done]
        body["found_before_fix"] = [f.as_dict() for f in found]
    return body


def _count(f: checks.Finding) -> str:
    return f"{f.count}+" if f.capped else str(f.count)


def _print_table(out: Output, findings: list[checks.Finding], done: list[repairs.Repair]) -> None:
    for repair in done:
        out.write(f"fix {repair.kind}: {repair.note}\n")
    if not findings:
        out.write("doctor: nothing stuck found.\n")
        return
    width = max(len(f.kind) for f in findings)
    out.write(f"{'KIND':<{width}}  {'COUNT':>6}  {'FIX':<3}  WHAT\n")
    for f in findings:
        out.write(f"{f.kind:<{width}}  {_count(f):>6}  {'yes' if f.fixable else 'no':<3}  {f.title}\n")
        out.write(f"{'':<{width}}  {'':>6}  {'':<3}  {f.explanation}\n")
        if f.run_ids:
            more = f" (+{f.count - len(f.run_ids)} more)" if f.count > len(f.run_ids) else ""
            out.write(f"{'':<{width}}  {'':>6}  {'':<3}  runs: {', '.join(f.run_ids)}{more}\n")
        if f.subjects:
            out.write(f"{'':<{width}}  {'':>6}  {'':<3}  of: {'; '.join(f.subjects)}\n")
    fixable = sum(1 for f in findings if f.fixable)
    hint = f"; {fixable} fixable: run with --fix" if fixable and not done else ""
    out.write(f"doctor: {len(findings)} finding{'s' * (len(findings) != 1)}{hint}.\n")
