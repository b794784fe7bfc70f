"""The read model: every read of runs that /api/, the WebSocket consumers, the admin's run pages,
the dashboard and `/metrics` draw from, each with the joins it needs. The pages only shape what
these return (the inspector's `pages`); what a run recorded leaves here masked where a page or a
stream shows it.

- `runs`: a page of runs (filters, stable cursor), one run with its steps and attempts, its
  events after a cursor, how long it is kept (the API, the commands).
- `live`: runs with their progress, what changed since a moment, a run's fingerprint and masked
  events (the dashboard's list, the admin's changelist, the consumers).
- `run`: one run's records for its page.
- `stats`, `backlog`, `decisions`, `limiters`: the dashboard's figures (`backlog` also `/metrics`).
- `declarations`: what a workflow declares for the pages (labels, decision queues).
- `source`: where operators' list reads go (`WORKFLOWS["READ_DATABASE"]`) and how old they are.
"""
