"""The operators' actions in the admin (replay, retry now, cancel, send, fork, pause, resume): a
confirmation page listing exactly what will change, then one call to `workflows.operations` (which
writes the audit entry) with the user as actor.

Each action needs its own permission (see inspector.models.RunOperation); a staff user without it
gets 403, and when they posted (tried to act, rather than look at the confirmation page) the run's
audit log gets a `refused` entry naming the attempt. The views only check, render and call: the
operation decides what is allowed.

A repair that does not apply to the run as it is (`workflows.core.repair_rules`: replay of a
running run, retry now of a finished or cancelled one, cancel of a finished one) is not offered by
the inspector; its confirmation page says why, and a direct POST answers 409 with that sentence,
changing nothing and writing no audit entry.
"""

from .common import AUDITED_AS, NOT_APPLICABLE, PERMISSIONS, Change, allowed
from .fork import fork_view
from .pauses import pause_refusal, pause_view, resume_refusal, resume_view
from .repairs import cancel_view, replay_view, retry_view
from .send import choice_url, send_view, waiting_on

__all__ = [
    "AUDITED_AS",
    "NOT_APPLICABLE",
    "PERMISSIONS",
    "Change",
    "allowed",
    "cancel_view",
    "choice_url",
    "fork_view",
    "pause_refusal",
    "pause_view",
    "replay_view",
    "resume_refusal",
    "resume_view",
    "retry_view",
    "send_view",
    "waiting_on",
]
