"""WebSocket routes: a run's events (`ws/runs/<run_id>/?after=<cursor>`) and the dashboard's
live list (`ws/runs/`), served by the inspector app."""

from inspector.routing import websocket_urlpatterns

__all__ = ["websocket_urlpatterns"]
