"""URL configuration: admin, the JSON API (jobs and the generic /api/), and app pages."""

from django.contrib import admin
from django.urls import include, path

from config.api import api
from jobs.api import router as jobs_router
from workflows.api import router as workflows_router

api.add_router("/api/", workflows_router)
api.add_router("/jobs", jobs_router)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("inspector.urls")),
    path("", api.urls),
]
