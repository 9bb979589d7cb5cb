from django.contrib import admin
from django.db import transaction
from django.utils import timezone

from .models import ApiToken, Membership, Project
from .project_settings import project_changes_audit
from .services import project_delete, project_storage_create, projects_delete


class MembershipInline(admin.TabularInline):
    model = Membership
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
        """A change to the project's settings is audited (roject/project_settings.py)."""
        before = form.initial if change else {}
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if change:
                project_changes_audit(
                    project=obj,
                    user=request.user,
                    before=before,
                    address=request.META.get("REMOTE_ADDR"),
                )
        project_storage_create(project=obj)

    def get_deleted_objects(self, objs, request):
        """Conversations and their records go with their project, though the admin never
        deletes them one by one (their admin is read-only, which would block this)."""
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        project_delete(project=obj)

    def delete_queryset(self, request, queryset):
        projects_delete(projects=queryset)


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

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        revoked = queryset.filter(revoked__isnull=True).update(revoked=timezone.now())
        self.message_user(request, f"{revoked} token(s) revoked.")
