"""WebSocket routes of the inspector (config/routing.py includes them)."""

from django.urls import path

from .consumers import RunEventsConsumer, RunListConsumer

websocket_urlpatterns = [
    path("ws/runs/", RunListConsumer.as_asgi()),
    path("ws/runs/<str:run_id>/", RunEventsConsumer.as_asgi()),
]
