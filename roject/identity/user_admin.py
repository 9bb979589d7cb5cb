"""The admin's pages of accounts and groups: who may grant rights is a superuser alone.

Django's own pages let a staff member who was given the right to change users tick
"superuser" on their own account, put themselves in a group with more rights, or set a
superuser's password and sign in as them; with a group's change right, add rights to their
own group. Rojo gives staff rights by the model (rojos, audit, projects), and keeps what
runs as the app (an MCP server's command, read from any of its variables) to superusers:
so here a staff member's account rights are read-only, superusers' and other staff
members' accounts are out of reach (a helpdesk that may change users sets the passwords of
people without admin rights, not of those with more rights than its own), and groups are
the superusers' to edit. Registered in place of Django's own by
roject/admin.py.
"""

from django.contrib.auth.admin import GroupAdmin, UserAdmin

_RIGHTS = ("is_superuser", "is_staff", "groups", "user_permissions")


class AccountAdmin(UserAdmin):
    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else (*fields, *_RIGHTS)

    def has_change_permission(self, request, obj=None) -> bool:
        if _out_of_reach(request, obj):
            return False  # its password, its rights: a way to become it
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if _out_of_reach(request, obj):
            return False
        return super().has_delete_permission(request, obj)


def _out_of_reach(request, account) -> bool:
    """Whether the account is one a staff member who is no superuser may not change or
    remove: a superuser's, or another staff member's, whose rights may be more than theirs
    (setting its password is signing in as it). Their own account stays theirs to edit."""
    if account is None or request.user.is_superuser:
        return False
    return account.is_superuser or (account.is_staff and account.pk != request.user.pk)


class SuperusersEdit:
    """An admin page whose rows only superusers add, change or remove, whatever rights a
    staff member was given: groups here, MCP servers (rojos.admin.mcp)."""

    def has_add_permission(self, request) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser


class RightsGroupAdmin(SuperusersEdit, GroupAdmin):
    pass
