"""The run inspector in the Django admin: stock, read-only model admins plus one custom page per run
(through `get_urls()` + `admin_site.admin_view`) and the operators' confirmation pages."""

from __future__ import annotations

import uuid

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.http import Http404, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from workflows.core import repair_rules
from workflows.core.durations import format_duration
from workflows.core.ids import short_run_id
from workflows.http import sse
from workflows.models import AuditEntry, Run
from workflows.reads import declarations, live
from workflows.reads.live import parse_run_id

from . import access, actions, decisions, groups, pages, pausing, runners
from .replica_lists import ReadsListsFromReplica, list_alias


class WorkflowFilter(admin.SimpleListFilter):
    title = "workflow"
    parameter_name = "workflow"

    def lookups(self, request, model_admin):
        names = (
            Run.objects.using(list_alias(request))
            .order_by("workflow")
            .values_list("workflow", flat=True)
            .distinct()
        )
        return [(n, n) for n in names]

    def queryset(self, request, queryset):
        return queryset.filter(workflow=self.value()) if self.value() else queryset


class VersionFilter(admin.SimpleListFilter):
    title = "version"
    parameter_name = "version"

    def lookups(self, request, model_admin):
        runs = Run.objects.using(list_alias(request)).order_by("workflow", "version")
        if request.GET.get("workflow"):
            runs = runs.filter(workflow=request.GET["workflow"])
        pairs = runs.values_list("workflow", "version").distinct()
        return [(v, f"{w} @ {v or '—'}") for w, v in pairs]

    def queryset(self, request, queryset):
        return queryset.filter(version=self.value()) if self.value() is not None else queryset


@admin.register(Run)
class RunAdmin(ReadsListsFromReplica, admin.ModelAdmin):
    list_display = [
        "run_link",
        "workflow",
        "version_short",
        "key_display",
        "label",
        "status_badge",
        "created",
        "duration",
        "current_step",
        "attempts",
    ]
    list_display_links = None
    list_filter = ["status", WorkflowFilter, VersionFilter, ("created_at", admin.DateFieldListFilter)]
    search_fields = ["key_text"]
    search_help_text = "Search by run id (whole or its first 8+ characters) or by key."
    ordering = ["-created_at"]
    list_per_page = 50
    show_full_result_count = False

    # --- read-only --------------------------------------------------------------------------------

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        # The one rule every read of runs follows (the dashboard and the WebSockets too).
        return access.can_view_runs(request.user)

    # --- the list ---------------------------------------------------------------------------------

    def get_queryset(self, request):
        return live.with_progress(super().get_queryset(request))

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        declarations.label_runs(list(changelist.result_list))  # once per page, not per row
        return changelist

    def changelist_view(self, request, extra_context=None):
        title = "Failed runs" if request.GET.get("status__exact") == "failed" else "Runs"
        # Ten columns and the filters fit a 1280 px window only without the admin's nav sidebar.
        context = {"title": title, "is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, context)

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        hexed = term.replace("-", "").lower()
        # A run id (32 hex digits), its start, or its end as the pages show it in brief
        # (`short_run_id`: the last 8 digits); longer hex text can only be part of a key.
        if 8 <= len(hexed) <= 32 and all(c in "0123456789abcdef" for c in hexed):
            if len(hexed) == 32:
                return queryset.filter(Q(id=uuid.UUID(hexed)) | Q(key_text__icontains=term)), False
            matches = self._ids_starting_with(queryset, hexed)
            if len(hexed) <= 12:
                matches += self._ids_ending_with(queryset, hexed)
            if matches:
                return queryset.filter(Q(id__in=matches) | Q(key_text__icontains=term)), False
        return super().get_search_results(request, queryset, search_term)

    @staticmethod
    def _ids_starting_with(queryset, prefix: str, limit: int = 200) -> list:
        # UUIDs are stored as uuid (PostgreSQL) or 32 hex chars (SQLite); a range of the 128-bit
        # value finds a prefix on both with the primary key's index.
        low = uuid.UUID(prefix.ljust(32, "0"))
        high = uuid.UUID(prefix.ljust(32, "f"))
        return list(queryset.filter(id__gte=low, id__lte=high).values_list("id", flat=True)[:limit])

    @staticmethod
    def _ids_ending_with(queryset, suffix: str, limit: int = 200) -> list:
        # The id as text: dashed on PostgreSQL, 32 hex digits on SQLite; its last 12 digits are
        # the same in both. No index serves it: the run table is scanned (an operator's search).
        ending = queryset.annotate(id_text=Cast("id", TextField())).filter(id_text__endswith=suffix)
        return list(ending.values_list("id", flat=True)[:limit])

    @admin.display(description="run", ordering="id")
    def run_link(self, run):
        return format_html(
            '<a class="wf-mono" href="{}" title="{}">{}</a>',
            reverse("admin:workflows_run_inspect", args=[run.id]),
            run.id,
            short_run_id(run.id),
        )

    @admin.display(description="version", ordering="version")
    def version_short(self, run):
        return format_html('<span class="wf-mono" title="{}">{}</span>', run.version, run.version[:12] or "—")

    @admin.display(description="key", ordering="key_text")
    def key_display(self, run):
        return format_html('<span class="wf-mono wf-nowrap">{}</span>', " / ".join(str(k) for k in run.key))

    @admin.display(description="label")
    def label(self, run):
        """What the run's workflow declares names it (`workflow(..., labels=...)`)."""
        labels = declarations.run_labels(run)
        if not labels:
            return "—"
        # The template escapes every value: its output is safe once trimmed.
        return mark_safe(render_to_string("inspector/_labels.html", {"labels": labels}).strip())

    @admin.display(description="status", ordering="status")
    def status_badge(self, run):
        flag = " ⏻" if run.cancel_requested and run.status not in ("cancelled", "completed", "failed") else ""
        return format_html('<span class="wf-badge wf-{}">{}{}</span>', run.status, run.status, flag)

    @admin.display(description="created", ordering="created_at")
    def created(self, run):
        local = timezone.localtime(run.created_at)
        return format_html(
            '<span class="wf-nowrap" title="{}">{}</span>',
            local.isoformat(),
            local.strftime("%Y-%m-%d %H:%M:%S"),
        )

    @admin.display(description="duration")
    def duration(self, run):
        return format_duration(live.run_duration(run))

    @admin.display(description="current step")
    def current_step(self, run):
        if not run.current_step:
            return "—"
        return format_html(
            '{} <span class="wf-badge wf-{} wf-small">{}</span>',
            run.current_step,
            run.current_step_status,
            run.current_step_status,
        )

    @admin.display(description="attempts", ordering="attempt_total")
    def attempts(self, run):
        return run.attempt_total

    # --- one run ----------------------------------------------------------------------------------

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<str:run_id>/inspect/", wrap(self.inspect_view), name="workflows_run_inspect"),
            path("<str:run_id>/inspect/live/", wrap(self.fragment_view), name="workflows_run_fragment"),
            path("<str:run_id>/streams/", wrap(self.streams_view), name="workflows_run_streams"),
            path(
                "<str:run_id>/replay/<int:entry_id>/",
                wrap(lambda r, run_id, entry_id: actions.replay_view(self, r, run_id, entry_id)),
                name="workflows_run_replay",
            ),
            path(
                "<str:run_id>/fork/<int:entry_id>/",
                wrap(lambda r, run_id, entry_id: actions.fork_view(self, r, run_id, entry_id)),
                name="workflows_run_fork",
            ),
            path(
                "<str:run_id>/retry/<int:entry_id>/",
                wrap(lambda r, run_id, entry_id: actions.retry_view(self, r, run_id, entry_id)),
                name="workflows_run_retry",
            ),
            path(
                "<str:run_id>/cancel/",
                wrap(lambda r, run_id: actions.cancel_view(self, r, run_id)),
                name="workflows_run_cancel",
            ),
            path(
                "<str:run_id>/pause/",
                wrap(lambda r, run_id: actions.pause_view(self, r, run_id)),
                name="workflows_run_pause",
            ),
            path(
                "<str:run_id>/resume/",
                wrap(lambda r, run_id: actions.resume_view(self, r, run_id)),
                name="workflows_run_resume",
            ),
            path(
                "<str:run_id>/send/",
                wrap(lambda r, run_id: actions.send_view(self, r, run_id)),
                name="workflows_run_send",
            ),
            path(
                "<str:run_id>/decide/<str:queue>/",
                wrap(lambda r, run_id, queue: decisions.decide_view(self, r, run_id, queue)),
                name="workflows_run_decide",
            ),
            *super().get_urls(),
        ]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        return HttpResponseRedirect(reverse("admin:workflows_run_inspect", args=[object_id]))

    def _page_context(self, request, run_id: str) -> dict:
        if not self.has_view_permission(request):
            raise PermissionDenied(access.VIEW_REFUSAL)
        page = pages.run_page(run_id)
        if page is None:
            raise Http404("no such run")
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"{page.run.workflow} {' / '.join(page.run.key)}",
            "subtitle": str(page.run.id),
            "page": page,
            "run": page.run,
            "run_banner": runners.run_banner(page.run),
            "slot_wait": groups.slot_wait(page.run),
            "pause": pausing.pause_facts(page.run, page.steps, page.audit),
            "can": {name: actions.allowed(request, name) for name in actions.PERMISSIONS},
            # Which repairs apply to the run as it is now (workflows.core.repair_rules): the others
            # are not offered.
            "offered": {
                **repair_rules.offered(page.run.status),
                "pause": actions.pause_refusal(page.run) is None,
                "resume": actions.resume_refusal(page.run) is None,
            },
            "fragment_url": reverse("admin:workflows_run_fragment", args=[page.run.id]),
            "is_nav_sidebar_enabled": False,  # the timeline needs the width
        }

    def inspect_view(self, request, run_id):
        # Read before the page: a change made while the page is read makes the tag stale, and the
        # page's socket then has it fetch its body again (never the other way round).
        found = parse_run_id(run_id)
        seen = live.fingerprint_tag(live.run_fingerprint(found)) if found is not None else ""
        context = {**self._page_context(request, run_id), "seen": seen}
        return TemplateResponse(request, "admin/workflows/run/inspect.html", context)

    def streams_view(self, request, run_id):
        """Every stream of the run as Server-Sent Events (`workflows.http.sse`), for the run page."""
        found = parse_run_id(run_id)
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            if found is None:
                raise sse.UnknownStream(run_id)
            sse.check_stream(found, None)
        except sse.UnknownStream:
            raise Http404("no such run") from None
        return sse.stream_response(found, None, sse.resume_point(request, 0))

    def fragment_view(self, request, run_id):
        return TemplateResponse(
            request, "admin/workflows/run/_run_body.html", self._page_context(request, run_id)
        )


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadsListsFromReplica, admin.ModelAdmin):
    list_display = ["created_at", "run_link", "action_display", "actor", "reason"]
    list_filter = ["action", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["actor", "reason"]
    ordering = ["-created_at", "-id"]
    list_display_links = None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="action", ordering="action")
    def action_display(self, entry):
        """A refusal names what was attempted, so it never reads as the action itself."""
        if entry.action == AuditEntry.Action.REFUSED:
            attempted = (entry.details or {}).get("attempted", "?")
            return format_html('<span class="wf-badge wf-refused">refused: {}</span>', attempted)
        return entry.get_action_display()

    @admin.display(description="run")
    def run_link(self, entry):
        return format_html(
            '<a class="wf-mono" href="{}">{}</a>',
            reverse("admin:workflows_run_inspect", args=[entry.run_id]),
            short_run_id(entry.run_id),
        )
