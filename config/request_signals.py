"""Django's request_started receivers left out of the ASGI process, where they are no-ops that
cost every request a hop to a thread.

Why: under ASGI, Django gives each request a thread of its own (asgiref's ThreadSensitiveContext
makes a one-thread executor per request and shuts it down at the end), and `Signal.asend` runs
sync receivers in it. At request_started that thread is brand new: it has no database connection
for `close_old_connections` to close and no query log for `reset_queries` to clear, yet calling
them starts the thread and hops to it and back. Without them an ASGI request has no sync receiver
at its start, so an async view such as `POST /jobs` runs with no thread at all until Django closes
the response; request_finished, which returns the connections that request's thread opened to
the pool, is left as it is. Only config/asgi.py calls this: the process it builds serves ASGI
(this project has no WSGI application; tests that serve WSGI reconnect the receivers they need).
"""

from __future__ import annotations

from django.core import signals
from django.db import close_old_connections, reset_queries


def none_at_request_start() -> None:
    """Disconnect Django's own request_started receivers (idempotent)."""
    for receiver in (reset_queries, close_old_connections):
        signals.request_started.disconnect(receiver)
