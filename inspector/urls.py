"""The operator dashboard, mounted at /dashboard/ by config/urls.py; `runs/<id>/` redirects to the
admin's run page."""

from django.urls import path

from . import views

app_name = "inspector"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("stats/", views.stats_fragment, name="stats"),
    path("runs/<uuid:run_id>/", views.run, name="run"),
]
