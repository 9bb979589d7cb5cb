"""The audit log: who did what, when, to which object, in which project.

Every audited action calls `audit_record` (or `aaudit_record`) once: one insert, never an
update. An entry names its actor, object and project by id *and* by a copy of their name,
with no foreign keys, so deleting a user, a token or a project neither changes nor deletes
what the log says about them. Details hold field names and plain facts, never a secret
value. Only `audit_prune` (the retention command) removes entries.
"""

import ipaddress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import models
from django.http import HttpRequest
from django.utils import timezone

from roject.identity.login_limits import client_ip
from roject.models import ApiToken, AuditAction, AuditEntry, Project

__all__ = [
    "AuditAction",
    "AuditActor",
    "aaudit_record",
    "audit_actor",
    "audit_command",
    "audit_prune",
    "audit_record",
    "audit_text",
]

_NAME_LENGTH = 200


@dataclass(frozen=True, slots=True)
class AuditActor:
    """Who acted and from where, handed down to the service that records the action:
    a user, a token (acting for its user), or neither (the system)."""

    user: Any = None
    token: ApiToken | None = None
    address: str | None = None
    command: str = ""  # a management command run without a user: its name goes in details


def audit_command(name: str) -> AuditActor:
    """The system, acting through the management command `name`."""
    return AuditActor(command=name)


def audit_actor(request: HttpRequest, *, user=None) -> AuditActor:
    """The actor of a request: its API token when it came with one (roject/identity/token_auth.py),
    else `user` (an API endpoint's request.auth: async code cannot load request.user), else
    its user; the client's address as roject/identity/login_limits.py reads it."""
    token = getattr(request, "api_token", None)
    if token is not None:
        user = token.user
    elif user is None:
        user = getattr(request, "user", None)
    address = client_ip(request)
    try:
        ipaddress.ip_address(address)
    except ValueError:
        address = None
    return AuditActor(user=user, token=token, address=address)


def audit_text(value, limit: int = _NAME_LENGTH) -> str:
    """`value` as an entry copies it: as text, at most `limit` characters, the last an
    ellipsis when it was cut."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _actor(user, token: ApiToken | None) -> tuple[str, int | None, str]:
    """(kind, user id, shown name) of whoever acted: a token, a user or the system."""
    if token is not None:
        return (
            AuditEntry.ActorKind.TOKEN,
            token.user_id,
            audit_text(f"{token.user} (token {token.name})"),
        )
    if user is not None and getattr(user, "is_authenticated", False):
        return AuditEntry.ActorKind.USER, user.pk, audit_text(user.get_username())
    return AuditEntry.ActorKind.SYSTEM, None, ""


def _project(project) -> tuple[int | None, str]:
    """The project's id and a copy of its name, from a Project or an id (looked up)."""
    if project is None:
        return None, ""
    if isinstance(project, Project):
        return project.pk, audit_text(project.name)
    name = Project.objects.filter(pk=project).values_list("name", flat=True).first()
    return int(project), audit_text(name or "")


def _object(obj, object_type: str, object_id, object_repr: str) -> tuple[str, str, str]:
    if isinstance(obj, models.Model):
        object_type = object_type or obj._meta.label_lower
        object_id = obj.pk if object_id in ("", None) else object_id
        object_repr = object_repr or str(obj)
    return object_type, "" if object_id is None else audit_text(object_id), audit_text(object_repr)


def audit_record(
    *,
    action: AuditAction | str,
    user=None,
    token: ApiToken | None = None,
    project=None,
    obj=None,
    object_type: str = "",
    object_id="",
    object_repr: str = "",
    details: dict | None = None,
    address: str | None = None,
    actor: AuditActor | None = None,
) -> AuditEntry:
    """(Blocking) Record one audited action: one INSERT.

    `user` (or `token`, which names its user) acted; neither means the system did. An
    `actor` (audit_actor of a request) gives all three of user, token and address.
    `project` is a Project or a project id; `obj` a model instance, or give
    `object_type`/`object_id`/`object_repr` for what is not a row (a file's path).
    """
    if actor is not None:
        user, token, address = actor.user, actor.token, actor.address
        if actor.command:
            details = {**(details or {}), "command": actor.command}
    kind, user_id, actor_name = _actor(user, token)
    project_id, project_name = _project(project)
    object_type, object_id, object_repr = _object(obj, object_type, object_id, object_repr)
    return AuditEntry.objects.create(
        action=AuditAction(action),
        actor_kind=kind,
        actor_user_id=user_id,
        actor_token_id=token.pk if token is not None else None,
        actor_name=actor_name,
        project_id=project_id,
        project_name=project_name,
        object_type=object_type,
        object_id=object_id,
        object_repr=object_repr,
        details=details or {},
        address=address or None,
    )


aaudit_record = sync_to_async(audit_record)
aaudit_record.__doc__ = "Async twin of audit_record."


def audit_prune(*, days: int) -> int:
    """(Blocking) Delete the entries older than `days` days; how many went."""
    cutoff = timezone.now() - timedelta(days=days)
    return AuditEntry.objects.prune_before(cutoff)
