"""The operators' permissions. A proxy of workflows.Run holds them, so the engine's models stay
free of admin concerns: grant `inspector.replay_run` etc. to a user or a group in the admin."""

from workflows.models import Run


class RunOperation(Run):
    class Meta:
        proxy = True
        verbose_name = "run operation"
        default_permissions = ()
        permissions = [
            ("replay_run", "Can replay a run from a step"),
            ("retry_step_now", "Can retry a step now"),
            ("cancel_run", "Can cancel a run"),
            ("send_message", "Can send a message to a run"),
            ("fork_run", "Can fork a run from a step"),
            ("pause_run", "Can pause and resume a run or a workflow"),
        ]
