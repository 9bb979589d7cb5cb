"""The admin of rojos: its form (rojo_form: the API key write-only, tools chosen from the
registry), no secret shown to staff who may only view, and every add, change and delete
audited (field names; values only of fields that hold no secret)."""

from django.contrib import admin, messages
from django.db import transaction

from roject.audit.log import AuditAction, audit_actor
from rojos.admin.mcp import RojoMcpServerInline
from rojos.admin.rojo_form import RojoForm
from rojos.admin.selftest import SelfTestAdminMixin
from rojos.changes.config_audit import config_audit, field_changes
from rojos.context.window import window_of

from ..models import Rojo

# Fields whose values may be secrets: an audit entry names them, never gives their values.
SECRET_FIELDS = frozenset({"api_key", "request_options"})
# The form's fields that show or concern them, left out for staff who may only view.
_SECRET_FORM_FIELDS = SECRET_FIELDS | {"clear_api_key", "confirm_key_env_host"}


@admin.register(Rojo)
class RojoAdmin(SelfTestAdminMixin, admin.ModelAdmin):
    form = RojoForm
    inlines = [RojoMcpServerInline]
    list_display = ["name", "slug", "model", "base_url", "has_key", "window_in_use"]
    search_fields = ["name", "slug", "model"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = [
        "window_in_use",
        "listed_window",
        "refused_window",
        "stream_usage_refused",
        "chars_per_token",
        "capability_table",
    ]

    def get_fields(self, request, obj=None):
        """Staff who may only view rojos see no secret: Django's admin shows a view-only
        user every field as text, the stored key and the request options (which may carry
        a provider's headers) among them. `has_key` says whether a key is set."""
        fields = super().get_fields(request, obj)
        if self.has_change_permission(request, obj) or (
            obj is None and self.has_add_permission(request)
        ):
            return fields
        return [name for name in fields if name not in _SECRET_FORM_FIELDS] + ["has_key"]

    def get_readonly_fields(self, request, obj=None):
        readonly = super().get_readonly_fields(request, obj)
        if self.has_change_permission(request, obj):
            return readonly
        return [*readonly, "has_key"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if form.key_dropped:
            messages.warning(
                request,
                f"The stored API key of {obj} was removed: its base URL moved to another "
                "scheme, host or port. Enter the key for the new endpoint.",
            )

    def save_related(self, request, form, formsets, change):
        """After the rojo and its MCP servers are saved (in the admin's transaction), one
        audit entry for the whole save."""
        super().save_related(request, form, formsets, change)
        fields = form.audited_fields()
        details = field_changes(
            fields=fields,
            before=form.values_before(fields) if change else {},
            after=form.cleaned_data,
            names_only=SECRET_FIELDS,
        )
        servers = _servers_changed(formsets)
        if servers:
            details["mcp_servers"] = servers
            details["fields"].append("mcp_servers")
        if change and not details["fields"]:
            return  # saved as it was: nothing to record
        action = AuditAction.ROJO_CHANGED if change else AuditAction.ROJO_CREATED
        config_audit(action=action, obj=form.instance, actor=audit_actor(request), details=details)

    def delete_model(self, request, obj):
        with transaction.atomic():
            _rojo_deleted(obj, request)
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for rojo in queryset:
                _rojo_deleted(rojo, request)
            super().delete_queryset(request, queryset)

    @admin.display(description="window in use")
    def window_in_use(self, rojo: Rojo) -> str:
        return f"{window_of(rojo):,} tokens"

    @admin.display(boolean=True, description="key set")
    def has_key(self, rojo: Rojo) -> bool:
        return bool(rojo.api_key or rojo.api_key_env)


def _servers_changed(formsets) -> dict:
    """The MCP servers a save added to, changed on or removed from the rojo, by slug."""
    found = {"added": [], "changed": [], "removed": []}
    for formset in formsets:
        found["added"] += [str(link.server.slug) for link in formset.new_objects]
        found["changed"] += [str(link.server.slug) for link, _ in formset.changed_objects]
        found["removed"] += [str(link.server.slug) for link in formset.deleted_objects]
    return {kind: slugs for kind, slugs in found.items() if slugs}


def _rojo_deleted(rojo: Rojo, request) -> None:
    details = {"slug": rojo.slug, "model": rojo.model}
    config_audit(
        action=AuditAction.ROJO_DELETED, obj=rojo, actor=audit_actor(request), details=details
    )
