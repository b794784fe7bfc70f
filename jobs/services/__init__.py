"""The example app's I/O: small clients of the model, the CRM and the CMS.

Each takes an injected `httpx2.AsyncClient` (a step takes its service's with
`jobs.services.http.client_for(service)`: a runner's shared one, see `service_clients`; tests swap
the transport with `use_transport(httpx2.MockTransport(...))`). Failures are sorted once, in
`http.py`, into what the engine understands:

    429, 5xx, network errors, timeouts  -> retry (RetryAfter when the server says how long)
    a reply that is not the JSON we need -> retry (InvalidReply)
    other 4xx (bad key, bad request)     -> CriticalError: no retry, the job fails at once
"""
