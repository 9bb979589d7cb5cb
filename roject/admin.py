import functools

from django.contrib import admin
from django.db import transaction

from . import storage
from .models import Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        storage.project_root_create(obj.id)

    def get_deleted_objects(self, objs, request):
        """Conversations and their records go with their project, though the admin never
        deletes them one by one (their admin is read-only, which would block this)."""
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        project_id = obj.pk
        super().delete_model(request, obj)
        transaction.on_commit(lambda: storage.project_storage_remove(project_id))

    def delete_queryset(self, request, queryset):
        project_ids = list(queryset.values_list("pk", flat=True))
        super().delete_queryset(request, queryset)
        for project_id in project_ids:
            transaction.on_commit(functools.partial(storage.project_storage_remove, project_id))
