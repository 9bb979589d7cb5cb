"""The audit log's core: one insert per record, names kept past deletions, no changes."""

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from roject.audit.log import AuditAction, audit_prune, audit_record
from roject.identity.tokens import api_token_create
from roject.models import AuditEntry


def test_a_record_names_actor_project_and_object_and_survives_their_deletion(users, project):
    """What the entry says is copied, not linked: deleting the user and project keeps it."""
    entry = audit_record(
        action=AuditAction.MEMBER_ADDED,
        user=users["owner"],
        project=project,
        obj=users["viewer"],
        details={"role": "viewer"},
        address="192.0.2.7",
    )
    name = project.name
    users["owner"].delete()
    project.delete()
    entry = AuditEntry.objects.get(pk=entry.pk)
    assert (entry.actor_kind, entry.actor_name) == ("user", "owner")
    assert (entry.project_name, entry.object_type, entry.object_repr) == (
        name,
        "auth.user",
        "viewer",
    )
    assert entry.details == {"role": "viewer"} and entry.address == "192.0.2.7"


def test_a_token_acts_for_its_user_and_nobody_is_the_system(users, project):
    made = api_token_create(user=users["editor"], name="ci bot")
    by_token = audit_record(action=AuditAction.EXPORT, token=made.token, project=project.pk)
    by_system = audit_record(action=AuditAction.UNDO, project=project)
    assert (by_token.actor_kind, by_token.actor_user_id) == ("token", users["editor"].pk)
    assert by_token.actor_name == "editor (token ci bot)"
    assert by_token.actor_token_id == made.token.pk
    assert (by_system.actor_kind, by_system.actor_user_id, by_system.actor_name) == (
        "system",
        None,
        "",
    )


def test_an_entry_cannot_be_changed_or_deleted_through_the_orm(users, project):
    entry = audit_record(action=AuditAction.LOGIN, user=users["viewer"])
    entry.action = AuditAction.LOGOUT
    with pytest.raises(TypeError):
        entry.save()
    with pytest.raises(TypeError):
        entry.delete()
    with pytest.raises(TypeError):
        AuditEntry.objects.filter(pk=entry.pk).update(action=AuditAction.LOGOUT)
    with pytest.raises(TypeError):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.get(pk=entry.pk).action == AuditAction.LOGIN


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_an_update_that_goes_around_the_orm(users):
    """The trigger made after migrate holds for raw SQL too."""
    entry = audit_record(action=AuditAction.LOGIN, user=users["viewer"])
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE roject_auditentry SET action = 'logout' WHERE id = %s", [entry.pk])
    assert AuditEntry.objects.get(pk=entry.pk).action == AuditAction.LOGIN


def test_pruning_removes_only_entries_older_than_the_retention(users):
    AuditEntry(
        action=AuditAction.LOGIN, actor_kind="user", at=timezone.now() - timedelta(days=91)
    ).save()
    new = audit_record(action=AuditAction.LOGOUT, user=users["viewer"])
    assert audit_prune(days=90) == 1
    assert list(AuditEntry.objects.values_list("pk", flat=True)) == [new.pk]
