"""`step.idempotency_key`: the key a step hands to an external API so that a retry, or a rerun
after a crash, is recognised as the same request, while an operator's replay is a new one.

It is derived, never stored: a uuid5 of the run, the run's replay epoch (how many times an operator
replayed the run), and the step's scope and name. So it is the same for every attempt and every
crash-restart of one recorded entry, and new for the entries an operator's replay runs again (the
replayed step and every one after it), while an API that keys on it still sees an opaque token
that is safe in any HTTP header.
"""

from __future__ import annotations

import uuid

NAMESPACE = uuid.UUID("6f1c2a5e-3b7d-4f4e-9a53-2d1c0e8b7a91")  # this project's; never change it


def step_idempotency_key(run_id: str, epoch: int, scope: str, name: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{run_id}\x1f{epoch}\x1f{scope}\x1f{name}"))
