"""The engine: a run's execution (replay, the commit pipeline, the primitives and control flow),
what users declare (definition) and the registry naming it, what they touch (contexts), the
client, the runner, the test helpers and the replayer `checkreplay` uses. It talks to a store
through `workflows.storage.base` only, and never imports Django.

The primitives (steps, waits, markers, flow, children) are written against
`workflows.core.recorder`, not against the execution: the execution and the replayer's dry run
both drive them, and no module here imports another in a circle (tests/unit/test_layers.py).
"""
