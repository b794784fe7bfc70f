"""The operator dashboard, mounted at /dashboard/ by config/urls.py; `runs/<id>/` redirects to the
admin's run page."""

from django.urls import path

from . import bulk, views, workflow_pauses

app_name = "inspector"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("stats/", views.stats_fragment, name="stats"),
    path("runs/<uuid:run_id>/", views.run, name="run"),
    path("workflows/pause/", workflow_pauses.pause_view, name="workflow_pause"),
    path("workflows/resume/", workflow_pauses.resume_view, name="workflow_resume"),
    path("bulk/", bulk.bulk_view, name="bulk"),
    path("bulk/recent/", bulk.recent_fragment, name="bulk_recent"),
    path("bulk/<int:op_id>/", bulk.operation_view, name="bulk_operation"),
    path("bulk/<int:op_id>/progress/", bulk.progress_fragment, name="bulk_progress"),
    path("bulk/<int:op_id>/abort/", bulk.abort_view, name="bulk_abort"),
]
