from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RojectConfig(AppConfig):
    name = "roject"
    verbose_name = "Projects"

    def ready(self) -> None:
        from .audit_guard import audit_guard_after_migrate

        post_migrate.connect(
            audit_guard_after_migrate, sender=self, dispatch_uid="roject_audit_guard"
        )
