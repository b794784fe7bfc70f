"""Operators' bulk actions: one action (cancel, replay from the failed step, retry now, ...) on
every run a filter matches, as a tracked operation that can be aborted.

- `actions`: the table of actions: each one's name, the run statuses it applies to and what it
  does to a batch of runs. Adding an action is one entry there.
- `control`: preview (a dry run: the count and a sample), start, abort, read an operation.
- `executor`: claims an operation under a lease and executes it in batches (a runner's
  housekeeping, or the command that started it).

The admin, the API and the command call `control` (as they call `workflows.operations` for one
run); the actions call `workflows.operations`, never the other way round.
"""
