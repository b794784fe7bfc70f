"""The router of the generic HTTP API for every registered workflow, mounted at /api/.

Each operation reads like a line of a table of contents: schema in, one client, read-model or
operation call, schema out. Domain errors become HTTP once, all in one shape, on the NinjaAPI that
mounts this router (`workflows.http.install_error_handlers`, as config/api.py does):
`{"error": {"code", "message", "detail"}}`. Every route needs `Authorization: Bearer <API key>`.

Two kinds of writes: an app's (start, send, action) through the workflow client (`runs.py`), and
an operator's repairs (replay, retry now, cancel, and a send that carries a `reason`) through
`workflows.operations` (`operators.py`), which audits them with the actor `api:<key name>`. The
routes are added to this router when `workflows.http` is imported.
"""

from __future__ import annotations

from ninja import Router

from .auth import ApiKeyAuth

router = Router(auth=ApiKeyAuth(), tags=["workflows"])

# Each route names its OpenAPI operation id as it was when the routes were one module
# (`workflows_api_<function>`), so clients generated from the schema keep their method names.
