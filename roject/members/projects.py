"""Creating and deleting projects (with their storage) and managing who is in them."""

import functools
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils.text import slugify

from roject import storage
from roject.audit.log import AuditAction, AuditActor, audit_record
from roject.models import Membership, Project, Role


class ProjectError(ValueError):
    """Bad input for a project operation, with a message fit for the user."""


@transaction.atomic
def project_create(*, name: str, owner, members: dict | None = None) -> Project:
    """Create a project with its owner (and optional {user: role} members) and its file root."""
    slug = slugify(name)
    if not slug:
        raise ProjectError(f"project name {name!r} gives an empty slug")
    if Project.objects.filter(slug=slug).exists():
        raise ProjectError(f"a project with slug {slug!r} already exists")
    if owner in (members or {}):
        raise ProjectError(f"{owner} is the owner; give other users as members")
    project = Project(name=name, slug=slug)
    try:
        project.full_clean()  # lengths: PostgreSQL refuses what SQLite would store
    except ValidationError as exc:
        raise ProjectError(validation_text(exc)) from None
    project.save()
    Membership.objects.create(user=owner, project=project, role=Role.OWNER)
    for user, role in (members or {}).items():
        Membership.objects.create(user=user, project=project, role=role)
    storage.project_root_create(project.id)
    return project


def project_storage_create(*, project: Project) -> Path:
    """Make the project's file root if it has none yet (a project saved in the admin)."""
    return storage.project_root_create(project.pk)


def project_delete(*, project: Project, actor: AuditActor | None = None) -> None:
    """Delete a project with its rows, audited as `actor`'s (None: the system's); its files
    go once the deletion is committed."""
    projects_delete(projects=Project.objects.filter(pk=project.pk), actor=actor)


def projects_delete(*, projects: QuerySet[Project], actor: AuditActor | None = None) -> None:
    """Delete several projects with their rows, one audit entry each; their files go once
    that is committed."""
    with transaction.atomic():
        doomed = list(projects)
        Project.objects.filter(pk__in=[p.pk for p in doomed]).delete()
        for project in doomed:
            audit_record(
                action=AuditAction.PROJECT_DELETED,
                actor=actor,
                project=project,
                obj=project,
                details={"slug": project.slug},
            )
            _storage_remove_on_commit(project.pk)


def _storage_remove_on_commit(project_id: int) -> None:
    # Files cannot be rolled back: removed only when the rows are surely gone, and not from
    # under a backup copying them (its snapshot still has the project).
    remove = functools.partial(storage.project_storage_remove, project_id)
    transaction.on_commit(functools.partial(storage.removal_when_unlocked, project_id, remove))


def validation_text(exc: ValidationError) -> str:
    """A model's validation errors on one line: `field: message; ...`."""
    return "; ".join(
        f"{field}: {message}"
        for field, messages in exc.message_dict.items()
        for message in messages
    )
