"""Cron schedules in the Django admin: each schedule's state (next 5 fire times, last runs with
links to the run inspector), and pause / resume as admin actions. Schedules are declared in code
(`workflows.schedule`), so nothing here adds, edits or deletes one.

Reading needs `workflows.view_schedule`; pausing and resuming need `workflows.change_schedule`
and go through a confirmation page that asks why. Each is written on the schedule (who, when,
why) and in the admin's history (LogEntry) under the user's name.
"""

from __future__ import annotations

import datetime as dt

from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from .. import operations
from ..core.exceptions import WorkflowError
from ..core.ids import short_run_id
from ..models import Schedule

UPCOMING = 5  # fire times shown ahead
FIELDS = (
    "name", "workflow", "cron_display", "catch_up", "state", "upcoming", "last_fire", "last_runs_display",
    "pause_display", "created_at", "updated_at",
)  # fmt: skip


def _local(when: dt.datetime | None) -> str:
    return "—" if when is None else timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S %Z")


def _run_url(run_id: str) -> str | None:
    """The run inspector's page (the inspector app), else the run's admin page, else nothing."""
    for name in ("admin:workflows_run_inspect", "admin:workflows_run_change"):
        try:
            return reverse(name, args=[run_id])
        except NoReverseMatch:
            continue
    return None


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ["name", "workflow", "cron_display", "state", "next_fire", "last_fire", "last_run"]
    list_filter = ["paused", "gone", "workflow"]
    search_fields = ["name", "workflow"]
    ordering = ["name"]
    actions = ["pause", "resume"]
    fields = FIELDS
    readonly_fields = FIELDS

    # --- declared in code: no add, edit or delete -------------------------------------------------

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {**(extra_context or {}), "show_save": False, "show_save_and_continue": False}
        context["show_save_and_add_another"] = False
        return super().change_view(request, object_id, form_url, context)

    # --- columns ----------------------------------------------------------------------------------

    @admin.display(description="cron", ordering="cron")
    def cron_display(self, row: Schedule) -> str:
        return format_html("<code>{}</code> {}", row.cron, row.timezone)

    @admin.display(description="state")
    def state(self, row: Schedule) -> str:
        if row.gone:
            return "gone (no longer in code)"
        return "paused" if row.paused else "active"

    @admin.display(description="next fire", ordering="next_fire_at")
    def next_fire(self, row: Schedule) -> str:
        if row.gone or row.paused:
            return "—"
        return _local(row.next_fire_at)

    @admin.display(description="last fire", ordering="last_fire_at")
    def last_fire(self, row: Schedule) -> str:
        return _local(row.last_fire_at)

    @admin.display(description="last run")
    def last_run(self, row: Schedule) -> str:
        return self._run_links((row.last_runs or [])[:1]) or "—"

    @admin.display(description=f"next {UPCOMING} fire times")
    def upcoming(self, row: Schedule) -> str:
        if row.gone:
            return "none: no runner's code declares it"
        # From the next fire not yet started (overdue while no runner is up); paused: from now on.
        start = timezone.now() if row.paused or row.next_fire_at is None else row.next_fire_at
        times = operations.schedule_of(row).upcoming(start, UPCOMING)
        lead = "if resumed now: " if row.paused else ""
        return format_html(
            "{}<ol>{}</ol>", lead, format_html_join("", "<li>{}</li>", ((_local(t),) for t in times))
        )

    @admin.display(description="last runs")
    def last_runs_display(self, row: Schedule) -> str:
        return self._run_links(row.last_runs or []) or "none yet"

    @admin.display(description="paused")
    def pause_display(self, row: Schedule) -> str:
        if not row.paused:
            return "no"
        return format_html("by {} at {}: {}", row.paused_by, _local(row.paused_at), row.pause_reason)

    @staticmethod
    def _run_links(fires: list[dict]) -> str:
        items = []
        for fire in fires:
            url, run_id = _run_url(str(fire["run_id"])), str(fire["run_id"])
            when = _local(dt.datetime.fromisoformat(fire["fire_time"]))
            if url is None:
                items.append(format_html("<li>{} run <code>{}</code></li>", when, short_run_id(run_id)))
            else:
                items.append(
                    format_html(
                        '<li>{} run <a href="{}"><code>{}</code></a></li>', when, url, short_run_id(run_id)
                    )
                )
        return format_html("<ul>{}</ul>", format_html_join("", "{}", ((i,) for i in items))) if items else ""

    # --- pause / resume (need change_schedule; a confirmation page asks why) ----------------------

    @admin.action(description="Pause selected schedules", permissions=["change"])
    def pause(self, request, queryset):
        return self._confirm(request, queryset, paused=True)

    @admin.action(description="Resume selected schedules", permissions=["change"])
    def resume(self, request, queryset):
        return self._confirm(request, queryset, paused=False)

    def _confirm(self, request, queryset, *, paused: bool):
        verb, action = ("pause", "pause") if paused else ("resume", "resume")
        rows = list(queryset.filter(gone=False).order_by("name"))
        why = request.POST.get("why", "").strip()
        if "apply" in request.POST and why and rows:
            done = []
            for row in rows:
                try:
                    operations.pause_schedule(
                        row.name, paused=paused, actor=request.user.get_username(), reason=why
                    )
                except WorkflowError as exc:
                    self.message_user(request, f"{row.name}: {exc}", messages.ERROR)
                    continue
                self.log_change(request, row, f"{'Paused' if paused else 'Resumed'}: {why}")
                done.append(row.name)
            if done:
                self.message_user(request, f"{verb.capitalize()}d: {', '.join(done)}.", messages.SUCCESS)
            return None  # back to the list
        if not rows:
            self.message_user(
                request, "No schedule to change (schedules gone from code are left).", messages.WARNING
            )
            return None
        now = timezone.now()
        for row in rows:
            row.before = "paused" if row.paused else f"active, next {_local(row.next_fire_at)}"
            row.after = (
                "paused" if paused else f"active, next {_local(operations.schedule_of(row).next_after(now))}"
            )
        return TemplateResponse(
            request,
            "admin/workflows/schedule/confirm_pause.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"{verb.capitalize()} schedules",
                "verb": verb,
                "action": action,
                "rows": rows,
                "why": why,
                "error": "Say why." if "apply" in request.POST else "",
            },
        )
