"""OFFLINE DEMO SERVICES, for demos and tests only: a fake OpenAI-compatible model, CRM and CMS.

They let a fresh clone run an AI job end to end with no API key, and let tests script failures.

    services.py   the behaviour: routes, deterministic answers, scripted and random failures
    server.py     serves it on a port (`python manage.py demoservices`), one thread per request
    transport.py  the same behaviour as an httpx2.MockTransport, for in-process tests

Routes: POST /v1/chat/completions, GET /crm/companies?name=…, POST /cms/posts (honours
Idempotency-Key), GET /cms/posts, GET /cms/posts/<id>; and the test knobs: POST /_demo/script,
GET /_demo/calls, POST /_demo/reset.
"""
