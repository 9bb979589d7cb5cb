"""Creating projects and managing who is in them."""

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
    project = Project.objects.create(name=name, slug=slug)
    Membership.objects.create(user=owner, project=project, role=Role.OWNER)
    for user, role in (members or {}).items():
        if user == owner:
            raise ProjectError(f"{owner} is the owner; give other users as members")
        Membership.objects.create(user=user, project=project, role=role)
    storage.project_root_create(project.id)
    return project
