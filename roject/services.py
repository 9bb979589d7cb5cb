"""Creating projects and managing who is in them."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from . import storage
from .models import Membership, Project, Role


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


def validation_text(exc: ValidationError) -> str:
    """A model's validation errors on one line: `field: message; ...`."""
    return "; ".join(
        f"{field}: {message}"
        for field, messages in exc.message_dict.items()
        for message in messages
    )
