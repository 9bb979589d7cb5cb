"""The admin's pages for how single sign-on ties people to accounts and projects.

An admin unlinks a provider account from an app account (its next sign-in is then matched
as a first one, roject/identity/oidc/accounts.py) and lets the group mapping manage a membership
again that an owner had removed. Both are deletions, audited one entry each; nothing here
is added or edited by hand, since the sign-in writes these rows.
"""

from django.contrib import admin
from django.db import transaction
from django.utils.translation import ngettext

from roject.audit.log import AuditAction, audit_actor, audit_record
from roject.models import MembershipRemoval, OidcIdentity


class _DeleteOnly(admin.ModelAdmin):
    """Rows the sign-in and the Members page write: listed, deleted one way (audited)."""

    actions = ["delete_audited"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # a bulk delete would skip the audit entries
        return actions

    def delete_model(self, request, obj):
        with transaction.atomic():
            self.audit(request, obj)
            obj.delete()

    @admin.action(description="Delete the selected rows", permissions=["delete"])
    def delete_audited(self, request, queryset):
        rows = list(queryset.select_related(*self.list_select_related))
        with transaction.atomic():
            for obj in rows:
                self.delete_model(request, obj)
        deleted = len(rows)
        self.message_user(request, f"{deleted} {ngettext('row', 'rows', deleted)} deleted.")

    def audit(self, request, obj) -> None:
        raise NotImplementedError


@admin.register(OidcIdentity)
class OidcIdentityAdmin(_DeleteOnly):
    """The provider accounts app users sign in as; deleting one unlinks it."""

    list_display = ["user", "issuer", "subject", "created"]
    list_filter = ["issuer"]
    list_select_related = ["user"]
    search_fields = ["user__username", "user__email", "subject"]
    readonly_fields = ["user", "issuer", "subject", "created"]

    def audit(self, request, obj) -> None:
        audit_record(
            action=AuditAction.SSO_UNLINKED,
            actor=audit_actor(request),
            obj=obj.user,
            details={"issuer": obj.issuer, "subject": obj.subject},
        )


@admin.register(MembershipRemoval)
class MembershipRemovalAdmin(_DeleteOnly):
    """Members an owner removed, whom the group mapping does not add back; deleting a row
    lets the mapping manage that membership again at the user's next sign-in."""

    list_display = ["user", "project", "removed_at"]
    list_select_related = ["user", "project"]
    search_fields = ["user__username", "project__name"]
    readonly_fields = ["user", "project", "removed_at"]

    def audit(self, request, obj) -> None:
        audit_record(
            action=AuditAction.MEMBER_REMOVAL_FORGOTTEN,
            actor=audit_actor(request),
            project=obj.project,
            obj=obj.user,
        )
