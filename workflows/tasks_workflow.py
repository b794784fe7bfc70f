"""Where `workflows.tasks.TaskTimeout` is defined, for its dotted path alone.

A task result names a failure by its class's dotted path (`TaskError.exception_class_path`, stored
with the run and imported back by `exception_class`): results written before `workflows.tasks`
became a package name `workflows.tasks_workflow.TaskTimeout`, so the class stays at that path.
"""


class TaskTimeout(TimeoutError):
    """A task ran past its `timeout`: a failed attempt, retried like any other."""
