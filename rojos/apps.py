from importlib import import_module

from django.apps import AppConfig
from django.conf import settings
from django.db import connections
from django.db.models.signals import post_migrate

from rojos.turns.memory_trim import malloc_tune


class RojosConfig(AppConfig):
    name = "rojos"
    verbose_name = "Rojos and conversations"

    def ready(self) -> None:
        # Modules that register tools of their own (see "Your own tools" in docs/guide.md).
        for module in getattr(settings, "ROJO_TOOL_MODULES", ()):
            import_module(module)
        post_migrate.connect(_search_triggers_restore, sender=self)
        import_module("rojos.models.key_checks")  # registers the key rule's system check
        import_module("rojos.metrics")  # /metrics lists every figure from the start, at 0
        malloc_tune()


def _search_triggers_restore(sender, using, **kwargs) -> None:
    """A migration that remade a table on SQLite dropped its search triggers: make them again."""
    from rojos.conversations.search_triggers import search_triggers_restore

    search_triggers_restore(connections[using])
