"""The one workflow `bench/side_by_side.py` needs beside those of `bench/flows.py`: a run with no
step, the fixed cost of a run (start, claim, completion). Served in the side-by-side bench's own
process only (WORKFLOWS_REGISTRIES="bench.flows.registry,bench._sbs_flows.registry")."""

from __future__ import annotations

from workflows import setup, workflow


async def zero_body(ctx):
    return 0


registry = setup(use={"sbs_zero": workflow(zero_body)})
