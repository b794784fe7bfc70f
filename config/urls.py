"""URL configuration: admin, the JSON API (jobs and the generic /api/), app pages and /metrics."""

from django.contrib import admin
from django.urls import include, path

from config.api import api
from jobs.api import router as jobs_router
from workflows.http import metrics_view
from workflows.http import router as workflows_router

api.add_router("/api/", workflows_router)
api.add_router("/jobs", jobs_router)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("inspector.urls")),
    path("metrics", metrics_view, name="metrics"),  # Prometheus (docs/operations.md: Metrics)
    path("", api.urls),
]
