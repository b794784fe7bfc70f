"""The project's one NinjaAPI: routers of the apps, and domain errors mapped to HTTP once, by the
workflows app's `install_error_handlers` (workflows/http/errors.py), as any project would.

Every error answers with the same shape: {"error": {"code": str, "message": str, "detail": any}}.
"""

from __future__ import annotations

from ninja import NinjaAPI, Swagger

from workflows.http import install_error_handlers

api = install_error_handlers(
    NinjaAPI(
        title="Durable workflows",
        version="1.0",
        description="Start and follow durable workflow runs; the example app's jobs.",
        docs_url="/api/docs",
        # Offline: Ninja's bundled Swagger UI (`ninja` in INSTALLED_APPS: its static files, no
        # CDN), and no online validator badge (Swagger UI's default would call validator.swagger.io).
        docs=Swagger(settings={"validatorUrl": None}),
        openapi_url="/api/openapi.json",
        urls_namespace="api",
    )
)

# Routers are added by the apps' api modules (see config/urls.py for the import order).
