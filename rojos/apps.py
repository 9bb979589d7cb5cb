from importlib import import_module

from django.apps import AppConfig
from django.conf import settings


class RojosConfig(AppConfig):
    name = "rojos"
    verbose_name = "Rojos and conversations"

    def ready(self) -> None:
        # Modules that register tools of their own (see "Your own tools" in the README).
        for module in getattr(settings, "ROJO_TOOL_MODULES", ()):
            import_module(module)
