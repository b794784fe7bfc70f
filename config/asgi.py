"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from config.request_signals import none_at_request_start  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402
from config.shedding import InFlightLimit  # noqa: E402
from inspector.access import OriginCheck  # noqa: E402

none_at_request_start()  # no hop to a thread when a request starts (config/request_signals.py)

application = ProtocolTypeRouter(
    {
        # Static files (admin, inspector) straight from daphne, async like the rest: a sync
        # middleware such as WhiteNoise would push every request, waits included, into a thread.
        # Past WEB_MAX_IN_FLIGHT requests in flight, a fast 503 with Retry-After (config/shedding.py).
        "http": InFlightLimit(ASGIStaticFilesHandler(django_asgi_app), settings.WEB_MAX_IN_FLIGHT),
        # Browsers' WebSockets from pages outside ALLOWED_HOSTS (and clients sending no Origin
        # and no run stream token) are refused at the handshake: no other site's page can open
        # one with our cookies; a non-browser client follows a run with its token.
        "websocket": OriginCheck(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
