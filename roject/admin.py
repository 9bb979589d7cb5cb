from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ORDER_VAR
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.forms.models import BaseInlineFormSet
from django.http import Http404, HttpResponseBadRequest, QueryDict
from django.urls import path
from django.utils.translation import ngettext

from roject.audit.export import EXPORT_FORMATS, audit_export_response
from roject.audit.log import AuditAction, audit_actor, audit_record
from roject.identity.login_limits import client_ip
from roject.identity.tokens import api_tokens_revoke
from roject.members.project_settings import project_changes_audit
from roject.members.projects import project_delete, project_storage_create, projects_delete
from roject.members.services import (
    LAST_OWNER,
    invitations_revoke_made_by,
    membership_removal_forget,
    membership_removal_mark,
)

from .models import ApiToken, AuditEntry, Invitation, Membership, Project, Role


class MembershipFormSet(BaseInlineFormSet):
    """The Members page's last-owner rule: a project that has an owner keeps one.

    Checked on the submitted forms, not under the owner lock of roject/members/services.py: two
    admins saving the same project at the same moment could still both drop an owner.
    A project made in the admin may start with no members at all.
    """

    def clean(self):
        super().clean()
        if self.instance.pk is None:
            return
        owners = set(self.instance.memberships.filter(role=Role.OWNER).values_list("pk", flat=True))
        if not owners:
            return
        for form in self.forms:
            data = form.cleaned_data or {}
            if not data:
                continue
            if data.get("DELETE") or data.get("role") != Role.OWNER:
                owners.discard(form.instance.pk)
            else:
                owners.add(form.instance.pk or "new")
        if not owners:
            raise ValidationError(LAST_OWNER)


class MembershipInline(admin.TabularInline):
    model = Membership
    formset = MembershipFormSet
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "owner_approval", "created"]
    list_filter = ["owner_approval"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def save_model(self, request, obj, form, change):
        """A change to the project's settings is audited (roject/members/project_settings.py)."""
        before = form.initial if change else {}
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if change:
                project_changes_audit(
                    project=obj,
                    user=request.user,
                    before=before,
                    address=client_ip(request),
                )
        project_storage_create(project=obj)

    def save_formset(self, request, form, formset, change):
        """Membership changes made here are audited as on the Members page (one entry each,
        in the admin's transaction); a role set here is no longer the group mapping's."""
        if formset.model is not Membership:
            return super().save_formset(request, form, formset, change)
        # By object: a deleted instance has no pk any more.
        roles_before = {id(f.instance): f.initial.get("role") for f in formset.initial_forms}
        formset.save()
        actor = audit_actor(request)
        details = {"via": "admin"}
        for membership in formset.new_objects:
            membership_removal_forget(user_id=membership.user_id, project_id=membership.project_id)
            entry = {"role": membership.role, **details}
            _member_audit(AuditAction.MEMBER_ADDED, membership, actor, entry)
        for membership, fields in formset.changed_objects:
            if "role" in fields:
                Membership.objects.filter(pk=membership.pk).update(source="")
                if roles_before.get(id(membership)) == Role.OWNER != membership.role:
                    _owner_links_revoke(membership)
                entry = {"from": roles_before.get(id(membership)), "to": membership.role, **details}
                _member_audit(AuditAction.MEMBER_ROLE_CHANGED, membership, actor, entry)
        for membership in formset.deleted_objects:
            membership_removal_mark(user_id=membership.user_id, project_id=membership.project_id)
            if roles_before.get(id(membership)) == Role.OWNER:
                _owner_links_revoke(membership)
            entry = {"role": roles_before.get(id(membership)), **details}
            _member_audit(AuditAction.MEMBER_REMOVED, membership, actor, entry)

    def get_deleted_objects(self, objs, request):
        """Conversations and their records go with their project, though the admin never
        deletes them one by one (their admin is read-only, which would block this)."""
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        project_delete(project=obj, actor=audit_actor(request))

    def delete_queryset(self, request, queryset):
        projects_delete(projects=queryset, actor=audit_actor(request))


def _owner_links_revoke(membership: Membership) -> None:
    invitations_revoke_made_by(user_id=membership.user_id, project_id=membership.project_id)


def _member_audit(action, membership: Membership, actor, details: dict) -> None:
    audit_record(
        action=action,
        actor=actor,
        project=membership.project,
        obj=membership.user,
        details=details,
    )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Every user's personal API tokens (digests only: a token is never shown again);
    revoking is the one change made here."""

    list_display = ["name", "user", "prefix", "read_only", "created", "last_used", "expires"]
    list_display += ["revoked"]
    list_filter = ["read_only", ("revoked", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = [f.name for f in ApiToken._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # made by their users (the tokens page) or create_api_token

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        revoked = api_tokens_revoke(tokens=queryset, actor=audit_actor(request))
        self.message_user(request, f"{revoked} {ngettext('token', 'tokens', revoked)} revoked.")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Invitation links, read-only (digests only: a link is never shown again); owners make
    and revoke them on their project's Members page."""

    list_display = ["project", "role", "email", "created_by", "created", "expires"]
    list_display += ["accepted_by", "accepted_at", "revoked_at"]
    list_filter = [("accepted_at", admin.EmptyFieldListFilter)]
    list_filter += [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["project__name", "email"]
    readonly_fields = [f.name for f in Invitation._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


class AuditProjectFilter(admin.SimpleListFilter):
    """The projects entries name, by the name they had (an entry outlives its project)."""

    title = "project"
    parameter_name = "project"

    def lookups(self, request, model_admin):
        named = (
            AuditEntry.objects.exclude(project_id=None)
            .values_list("project_id", "project_name")
            .order_by("project_name", "project_id")
            .distinct()[:2000]
        )
        return [(str(pk), name or f"#{pk}") for pk, name in dict(named).items()]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(project_id=int(value)) if value.isdigit() else queryset.none()


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """The audit log, read-only for everyone (superusers too), with CSV and JSON exports
    of the filtered list."""

    list_display = ["at", "action", "actor_kind", "actor_name", "project_name", "object_type"]
    list_display += ["object_repr", "address"]
    list_filter = ["action", "actor_kind", "at", AuditProjectFilter]
    search_fields = ["actor_name", "object_repr", "object_id"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]
    actions = None
    change_list_template = "admin/roject/auditentry_change_list.html"
    show_full_result_count = False  # a large log is not counted twice per page

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_urls(self):
        export = self.admin_site.admin_view(self.export_view)
        return [
            path("export/<str:fmt>/", export, name="roject_auditentry_export"),
            *super().get_urls(),
        ]

    def export_view(self, request, fmt: str):
        """The changelist's entries as it filters them, as CSV or JSON, streamed."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if fmt not in EXPORT_FORMATS:
            raise Http404("Export as csv or json.")
        filters = _export_filters(request)
        request.GET = _only(request.GET, {*filters, ORDER_VAR})
        try:
            entries = self.get_changelist_instance(request).get_queryset(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("These filters are not valid.")
        return audit_export_response(
            entries=entries, fmt=fmt, actor=audit_actor(request), filters=filters
        )


# The changelist's own filter parameters (list_filter, date_hierarchy, search): the only
# ones an export applies and its audit entry keeps, so nothing else a URL carries (by
# mistake or on purpose) lands in the log, nor turns into a lookup the export fails on.
_FILTER_NAMES = frozenset({"q", "project"})
_FILTER_FIELDS = frozenset({"action", "actor_kind", "at"})


def _export_filters(request) -> dict[str, str]:
    return {
        name: value
        for name, value in request.GET.items()
        if len(name) <= 40 and (name in _FILTER_NAMES or name.partition("__")[0] in _FILTER_FIELDS)
    }


def _only(query: QueryDict, names: set[str]) -> QueryDict:
    kept = query.copy()
    for name in list(kept):
        if name not in names:
            del kept[name]
    return kept


from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402

from roject.identity import admin as identity_admin  # noqa: E402, F401  (registers the single sign-on pages)
from roject.identity.user_admin import AccountAdmin, RightsGroupAdmin  # noqa: E402

# Accounts' and groups' rights are the superusers' to grant (roject/identity/user_admin.py).
admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), AccountAdmin)
admin.site.unregister(Group)
admin.site.register(Group, RightsGroupAdmin)
