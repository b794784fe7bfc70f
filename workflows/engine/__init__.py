"""The engine: a run's execution (replay, the commit pipeline, the primitives and control flow),
what users declare (definition) and touch (contexts), the client, the runner, the test helpers
and the replayer `checkreplay` uses. It talks to a store through `workflows.storage.base` only,
and never imports Django."""
