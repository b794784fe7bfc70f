"""What the inspector app needs when installed: Channels, a channel layer, an ASGI application
(workflows.E010, E011, W010)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks

from .base import DOCS


def check_inspector(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The inspector's live pages follow runs over WebSockets: Channels consumers, a channel
    layer, and an ASGI application that routes `inspector.routing.websocket_urlpatterns`."""
    if not apps.is_installed("inspector"):
        return []
    errors: list[checks.CheckMessage] = []
    try:
        importlib.import_module("channels")
    except ImportError as exc:
        errors.append(
            checks.Error(
                f"The inspector app needs channels, which does not import: {exc}.",
                hint="pip install channels (a dependency of django-durable-workflows).",
                id="workflows.E010",
            )
        )
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    if not isinstance(layers, Mapping) or "default" not in layers:
        errors.append(
            checks.Error(
                'CHANNEL_LAYERS has no "default" layer: the inspector\'s WebSocket consumers need one.',
                hint='One process: CHANNEL_LAYERS = {"default": {"BACKEND": '
                '"channels.layers.InMemoryChannelLayer"}}; several: channels_redis (extra "redis"). ' + DOCS,
                id="workflows.E011",
            )
        )
    if not getattr(settings, "ASGI_APPLICATION", None):
        errors.append(
            checks.Warning(
                "ASGI_APPLICATION is not set: the inspector's live pages need WebSockets, served by "
                "an ASGI application that routes inspector.routing.websocket_urlpatterns.",
                hint='Set ASGI_APPLICATION = "mysite.asgi.application" (see the README for the '
                "asgi.py) and serve it with an ASGI server (daphne, uvicorn).",
                id="workflows.W010",
            )
        )
    return errors
