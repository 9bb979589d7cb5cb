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
        _mcp_account_removal_connect()


def _mcp_account_removal_connect() -> None:
    """A person's MCP tokens go with their last membership or their deactivation."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save

    from roject.models import Membership

    post_delete.connect(_membership_deleted, sender=Membership, dispatch_uid="rojo-mcp-member")
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="rojo-mcp-user")


# Thin receivers: the removal module brings the MCP SDK (over a second to import), which a
# management command that never touches a membership or a user should not pay for at setup.
def _membership_deleted(sender, instance, **kwargs) -> None:
    from rojos.mcp.connect.removal import membership_deleted

    membership_deleted(sender, instance, **kwargs)


def _user_saved(sender, instance, **kwargs) -> None:
    from rojos.mcp.connect.removal import user_saved

    user_saved(sender, instance, **kwargs)


def _search_triggers_restore(sender, using, **kwargs) -> None:
    """A migration that remade a table on SQLite dropped its search triggers: make them again."""
    from rojos.conversations.search_triggers import search_triggers_restore

    search_triggers_restore(connections[using])
