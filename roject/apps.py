from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import post_migrate


class RojectConfig(AppConfig):
    name = "roject"
    verbose_name = "Projects"

    def ready(self) -> None:
        from roject.audit.guard import audit_guard_after_migrate
        from roject.audit.logins import audit_login, audit_login_failed, audit_logout

        post_migrate.connect(
            audit_guard_after_migrate, sender=self, dispatch_uid="roject_audit_guard"
        )
        user_logged_in.connect(audit_login, dispatch_uid="roject_audit_login")
        user_login_failed.connect(audit_login_failed, dispatch_uid="roject_audit_login_failed")
        user_logged_out.connect(audit_logout, dispatch_uid="roject_audit_logout")
