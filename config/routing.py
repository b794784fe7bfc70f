"""WebSocket routes (filled by the inspector app)."""

websocket_urlpatterns: list = []
