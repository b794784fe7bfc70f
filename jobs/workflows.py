"""The example app's workflows.

`aiJob` turns a sales call transcript into a brief: extract companies and action items with the
model, look each company up in the CRM, summarize, publish to the CMS. One run per job, keyed by
the job id. The body only calls steps; every call to the outside world is in a step, through the
clients in `jobs.services`.

`reviewedBrief` is the same brief with a person in the loop: it waits for an operator's approval
(a message on its `approval` queue, sent with the dashboard's Approve / Reject buttons that the
queue's `choices` declare, the API or `manage.py workflows send`); when nobody answers in time it
escalates and keeps waiting; approved, it publishes.

`invoice` is the smaller example: load the subtotal, calculate the tax, save the invoice.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobs import prompts
from jobs.now import live_labels, stage_of
from jobs.schemas import InvoiceOrder, JobStart
from jobs.services import cms, crm, http, model
from workflows import OPERATOR, CriticalError, event, format_duration, queue, setup, workflow

STAGES = (
    "queued", "extracting", "enriching", "summarizing", "awaiting_approval", "escalated", "approved",
    "rejected", "publishing", "published", "failed",
)  # fmt: skip

APPROVAL_TIMEOUT = 24 * 3600.0  # seconds an operator has before the review escalates

# Model calls can be slow and rate limited: a long timeout, and patient retries (4 s, 8 s ... 60 s).
MODEL_STEP = {
    "timeout": 120,
    "retry_on_timeout": True,
    "max_retries": 6,
    "retry_backoff_base": 2.0,
    "retry_backoff_max": 60.0,
}
# CRM and CMS calls: the same patience, a shorter timeout.
SERVICE_STEP = {**MODEL_STEP, "timeout": 30}


class Progress(BaseModel):
    stage: Literal[STAGES]  # type: ignore[valid-type]
    detail: str | None = None


def initial_state() -> dict[str, Any]:
    return {
        "stage": "queued",
        "title": None,
        "extracted": None,  # {"companies": [...], "actionItems": [...]}
        "companies": [],  # one CRM lookup per extracted company, in order
        "summary": None,
        "url": None,  # the published post
        "error": None,
    }


# The external calls of the steps (`workflow(..., calls_out=...)`): what a replay makes again.
CALLS_OUT = {
    "extract": "ask the model to extract the companies and action items",
    "enrich-*": "look the company up in the CRM",
    "summarize": "ask the model to write the brief",
    "publish": "post the brief to the CMS",
}


# --- the aiJob body: step calls and branching only ------------------------------------------------


async def ai_job_run(ctx) -> dict[str, Any]:
    start = await ctx.queue.next("wait-start", names=["start"])
    job = start.body
    summary = await write_brief(ctx, job)
    return await publish_and_record(ctx, job, summary)


async def publish_and_record(ctx, job: dict[str, Any], summary: str) -> dict[str, Any]:
    """publish -> record-publication: the post, then its row in the `jobs` table (PublishedBrief),
    written in the transaction that records the step, so exactly once per published brief."""
    post = await ctx.step("publish", partial(publish, body=summary), input=job["title"], **SERVICE_STEP)
    await ctx.transaction("record-publication", record_publication, input={"title": job["title"], **post})
    return post


async def write_brief(ctx, job: dict[str, Any]) -> str:
    """extract -> enrich-<i> (one CRM lookup per company) -> summarize; returns the brief."""
    extracted = await ctx.step("extract", extract, input=job, **MODEL_STEP)
    names = extracted["companies"]
    companies = []
    for i, name in enumerate(names):
        enrich_one = partial(enrich, index=i, total=len(names))
        companies.append(await ctx.step(f"enrich-{i}", enrich_one, input=name, **SERVICE_STEP))
    facts = {"title": job["title"], "actionItems": extracted["actionItems"], "companies": companies}
    return await ctx.step(
        "summarize", partial(summarize, transcript=job["transcript"]), input=facts, **MODEL_STEP
    )


# --- its steps ------------------------------------------------------------------------------------


def _stage(step, stage: str, detail: str | None = None) -> None:
    """Enter a stage: saved in state (with the step's result) and broadcast as progress."""
    if step.attempt > 1:
        detail = f"{detail} (attempt {step.attempt})" if detail else f"attempt {step.attempt}"
    step.state["stage"] = stage
    step.broadcast("progress", {"stage": stage, "detail": detail})


async def extract(step) -> dict[str, list[str]]:
    _stage(step, "extracting")
    title, transcript = step.input["title"], step.input["transcript"]
    async with http.client_for("model") as client:
        completion = await model.complete(
            client, prompts.extract_messages(title, transcript), json_object=True
        )
    step.meta["usage"] = completion.usage
    step.meta["gen_ai"] = completion.gen_ai()
    extracted = prompts.parse_extraction(completion.content)  # invalid JSON raises: retried
    step.state.update(title=title, extracted=extracted)
    return extracted


async def enrich(step, *, index: int, total: int) -> dict[str, Any]:
    name = step.input
    _stage(step, "enriching", f"{name} ({index + 1}/{total})")
    async with http.client_for("crm") as client:
        record = await crm.find_company(client, name)
    company = {"name": name, "found": record is not None, "crm": record}
    step.state["companies"] = [*step.state["companies"][:index], company]
    return company


async def summarize(step, *, transcript: str) -> str:
    _stage(step, "summarizing")
    facts = step.input
    messages = prompts.summarize_messages(
        facts["title"], transcript, facts["actionItems"], facts["companies"]
    )
    async with http.client_for("model") as client:
        # The brief's tokens go to the step's stream as they come (the run page, `jobs submit
        # --follow`); a retry starts the stream over, and the recorded summary is what counts.
        completion = await model.complete(client, messages, on_text=step.stream.write)
    step.meta["usage"] = completion.usage
    step.meta["gen_ai"] = completion.gen_ai()
    summary = completion.content.strip()
    if not summary:
        raise http.InvalidReply("model returned an empty brief")
    step.state["summary"] = summary
    return summary


async def publish(step, *, body: str) -> dict[str, Any]:
    title = step.input
    _stage(step, "publishing", title)
    async with http.client_for("cms") as client:
        # The step's idempotency key: a retry after a lost response, or a rerun after a crash, gets
        # the same post back; an operator's replay of this step (or an earlier one) posts anew.
        post = await cms.publish_post(client, title=title, body=body, idempotency_key=step.idempotency_key)
    step.state.update(stage="published", url=post["url"])
    step.broadcast("progress", {"stage": "published", "detail": post["url"]})
    return {"postId": post.get("id"), "url": post["url"]}


def record_publication(step) -> dict[str, Any]:
    """Sync ORM code run by `ctx.transaction`: the row commits with the step's record or not at
    all, and a recorded step never runs again, so a crash cannot leave a published brief twice
    in the table, or not at all. An operator's replay of `publish` records its new post anew."""
    from django.utils import timezone

    from jobs.models import PublishedBrief  # the app registry is ready when a runner runs this

    row = PublishedBrief.objects.create(
        job_id=step.key[0], run_id=step.run_id, url=step.input["url"], title=step.input["title"],
        published_at=timezone.now(), step_key=step.idempotency_key,
    )  # fmt: skip
    return {"publishedBriefId": row.id}


# --- failures -------------------------------------------------------------------------------------


def on_error(c, event) -> None:
    """Say what went wrong on every failed attempt; mark the job failed when no retry is left."""
    if event.step is not None:
        info = event.step
        reason = info.error.get("message") or info.error.get("name")
        if info.will_retry:
            detail = (
                f"{info.step_name} failed ({reason}), retrying in {format_duration(info.retry_delay or 0)}"
            )
            c.broadcast("progress", {"stage": stage_of(info.step_name), "detail": detail})
        else:
            why = "no retry left" if info.remaining_retries == 0 else "not retried"
            _mark_failed(c, f"{info.step_name} failed ({reason}), {why}")
    elif event.workflow is not None and c.state.get("stage") != "failed":
        error = event.workflow.error
        _mark_failed(c, f"job failed ({error.get('name')}: {error.get('message')})")


def on_repair(c, repair) -> None:
    """An operator's replay or retry now was accepted, or this run is a fork of another: the old
    failure is no longer the job's truth. The error goes; a replay (or a fork, which is a replay
    into a new run) puts the job back in the queue (`queued`) until its first step starts, a
    retry now says which step tries again."""
    c.state["error"] = None
    if repair.action in ("replay", "fork"):
        forget_from(c.state, repair.step)
        c.state["stage"] = "queued"
        detail = f"{repair.action} from {repair.step} accepted; waiting for a runner"
    else:
        stage = stage_of(repair.step)
        c.state["stage"] = stage if stage != "failed" else c.state.get("stage") or "queued"
        detail = f"{repair.step}: retrying now (operator)"
    c.broadcast("progress", {"stage": c.state["stage"], "detail": detail})


# The entries of aiJob and reviewedBrief in the order they run, with the state keys each step
# writes and their value before it ran: a replay from one forgets what it and the later ones wrote.
WRITES: tuple[tuple[str, str | None, Any], ...] = (
    ("wait-start", None, None), ("extract", "extracted", None), ("enrich-", "companies", []),
    ("summarize", "summary", None), ("request-approval", None, None), ("wait-approval", None, None),
    ("escalate", "escalated", False), ("wait-escalated-approval", None, None),
    ("record-decision", "review", None), ("publish", "url", None), ("record-publication", None, None),
)  # fmt: skip


def forget_from(state: dict[str, Any], step: str) -> None:
    """Forget the results of `step` and of the steps after it (a replay runs them again): the old
    brief and URL must not read as the job's current ones. The CRM lookups before `enrich-<i>` stay."""
    name = "enrich-" if step.startswith("enrich-") else step
    first = next((i for i, (entry, _, _) in enumerate(WRITES) if entry == name), None)
    if first is None:
        return
    kept = state.get("companies") or []
    for _, key, before in WRITES[first:]:
        if key is not None and key in state:
            state[key] = before
    index = step.removeprefix("enrich-")
    if name == "enrich-" and index.isdigit():
        state["companies"] = kept[: int(index)]


def _mark_failed(c, detail: str) -> None:
    c.state["stage"] = "failed"
    c.state["error"] = detail
    c.broadcast("progress", {"stage": "failed", "detail": detail})


ai_job = workflow(
    ai_job_run,
    state=initial_state,
    queues={"start": queue(JobStart)},
    events={"progress": event(Progress)},
    actions={"status": lambda c: {"status": c.status, **c.state}},
    on_error=on_error,
    on_repair=on_repair,
    labels=("title", "stage"),  # how the inspector and the dashboard name a job
    live_labels=live_labels,  # the stage now, as GET /jobs/{id} says it (a running step's too)
    calls_out=CALLS_OUT,  # the replay confirmation says which of these run again
)


# --- reviewedBrief: a person approves before publishing -------------------------------------------


class Approval(BaseModel):
    """An operator's verdict on the `approval` queue."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    by: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=2000)


# The decision form's buttons for a brief awaiting review; the operator who clicks is `by`.
VERDICTS = {
    "Approve": {"decision": "approve", "by": OPERATOR},
    "Reject": {"decision": "reject", "by": OPERATOR},
}


async def reviewed_brief_run(ctx) -> dict[str, Any]:
    job = (await ctx.queue.next("wait-start", names=["start"])).body
    summary = await write_brief(ctx, job)
    await ctx.step("request-approval", request_approval, input={"title": job["title"], "summary": summary})
    verdict = await ctx.queue.next(
        "wait-approval", names=["approval"], timeout=APPROVAL_TIMEOUT, completable=True
    )
    if verdict is None:
        await ctx.step(
            "escalate", escalate, input={"title": job["title"], "waited_seconds": APPROVAL_TIMEOUT}
        )
        verdict = await ctx.queue.next("wait-escalated-approval", names=["approval"], completable=True)
    review = await ctx.step("record-decision", record_decision, input=verdict.body)
    await verdict.complete({"decision": review["decision"]})
    if review["decision"] == "reject":
        return {"rejected": True, "by": review["by"]}
    return await publish_and_record(ctx, job, summary)


def request_approval(step) -> None:
    _stage(step, "awaiting_approval", f"brief for {step.input['title']!r} waits for an operator")


def escalate(step) -> None:
    hours = step.input["waited_seconds"] / 3600
    step.state["escalated"] = True
    _stage(step, "escalated", f"no decision after {hours:g}h: escalated, still waiting for approval")


def record_decision(step) -> dict[str, Any]:
    review = {"decision": step.input["decision"], "by": step.input["by"], "note": step.input.get("note")}
    step.state["review"] = review
    stage = "approved" if review["decision"] == "approve" else "rejected"
    _stage(step, stage, f"{stage} by {review['by']}" + (f": {review['note']}" if review["note"] else ""))
    return review


reviewed_brief = workflow(
    reviewed_brief_run,
    state=lambda: {**initial_state(), "escalated": False, "review": None},
    # The inspector's decision form: Approve / Reject with a note, below the brief being approved.
    queues={
        "start": queue(JobStart),
        "approval": queue(Approval, choices=VERDICTS, note="note", shows=("title", "summary")),
    },
    events={"progress": event(Progress)},
    actions={"status": lambda c: {"status": c.status, **c.state}},
    on_error=on_error,
    on_repair=on_repair,
    labels=("title", "stage"),
    live_labels=live_labels,
    calls_out=CALLS_OUT,
)


# --- invoice: the smaller example -----------------------------------------------------------------

TAX_RATES_BP = {"EU": 2000, "UK": 2000, "US-CA": 725, "US-NY": 400, "US-OR": 0}  # basis points


async def invoice_run(ctx) -> dict[str, Any]:
    order = (await ctx.queue.next("wait-order", names=["order"])).body
    subtotal = await ctx.step("load-subtotal", load_subtotal, input=order["lines"])
    tax = await ctx.step(
        "calculate-tax", calculate_tax, input={"subtotal_cents": subtotal, "region": order["region"]}
    )
    return await ctx.step(
        "save-invoice",
        save_invoice,
        input={"subtotal_cents": subtotal, "tax_cents": tax, "region": order["region"]},
    )


def load_subtotal(step) -> int:
    return sum(line["quantity"] * line["unit_price_cents"] for line in step.input)


def calculate_tax(step) -> int:
    region = step.input["region"]
    if region not in TAX_RATES_BP:
        raise CriticalError(f"no tax rate for region {region!r}")
    # Round half up to the cent.
    return (step.input["subtotal_cents"] * TAX_RATES_BP[region] + 5000) // 10000


def save_invoice(step) -> dict[str, Any]:
    invoice = {**step.input, "total_cents": step.input["subtotal_cents"] + step.input["tax_cents"]}
    step.state.update(status="saved", invoice=invoice)
    return invoice


invoice = workflow(
    invoice_run,
    state=lambda: {"status": "open", "invoice": None},
    queues={"order": queue(InvoiceOrder)},
    actions={"total": lambda c: (c.state.get("invoice") or {}).get("total_cents")},
)

registry = setup(use={"aiJob": ai_job, "reviewedBrief": reviewed_brief, "invoice": invoice})
