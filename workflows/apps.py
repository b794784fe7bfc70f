from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Hand the engine its defaults: the Django store, the registries of the settings, and
        sync steps that close stale database connections around them, the size limit of recorded
        values; register the system
        checks (workflows/checks/)."""
        from . import checks, conf
        from .core import jsonvalue, streams
        from .engine import defaults

        defaults.configure(
            store=conf.default_store, registry=conf.registry, sync_step_runner=conf.run_sync_step
        )
        jsonvalue.set_max_bytes(conf.max_value_bytes)  # WORKFLOWS["MAX_VALUE_BYTES"], read at each check
        streams.set_max_stream_bytes(conf.max_stream_bytes)  # WORKFLOWS["MAX_STREAM_BYTES"]
        checks.register()
