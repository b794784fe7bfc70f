from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Run inspector"

    def import_models(self) -> None:
        # The inspector's models and admins are built on the workflows app's: without it Django
        # would fail on the import below with a message about a model, before any system check
        # could run. Say what is missing instead (all app configs exist by now).
        if not self.apps.is_installed("workflows"):
            raise ImproperlyConfigured(
                "(workflows.E012) The 'inspector' app needs the 'workflows' app: add \"workflows\" "
                "to INSTALLED_APPS."
            )
        super().import_models()
