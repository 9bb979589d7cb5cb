"""Audit entries for what happens to a project's files: a deletion (by a person, or by a
rojo's or an outside agent's tool call) and a restore of an older version. Each is written
in the transaction that stores the change's record, so the two exist together or not at all.
"""

from roject.audit.log import AuditAction, AuditActor, audit_record
from rojos.models import Conversation, FileChange

# The built-in tool whose changes are deletions (a move keeps the file).
DELETING_TOOL = "delete_path"


def _paths(change: FileChange) -> str:
    return ", ".join(change.paths)


def file_change_audit(*, change: FileChange, action: AuditAction, actor: AuditActor) -> None:
    """(Blocking) One entry for a person's deletion or restore recorded as `change`."""
    audit_record(
        action=action,
        actor=actor,
        project=change.project_id,
        object_type="file",
        object_id=_paths(change),
        object_repr=_paths(change),
        details={"change": change.pk, "tool": change.tool},
    )


def tool_change_audit(
    *, change: FileChange, conversation: Conversation, user, address: str | None = None
) -> None:
    """(Blocking) One entry when a tool call of a turn deleted files: the turn's user acted
    (through its token when the turn came over MCP, from the request's `address`)."""
    if change.tool != DELETING_TOOL:
        return
    token = conversation.via_token if conversation.via_mcp else None
    if token is None and user is not None and not hasattr(user, "get_username"):
        user = conversation.user  # the context holds only the user's id
    rojo = conversation.rojo
    audit_record(
        action=AuditAction.FILE_DELETED,
        user=user,
        token=token,
        project=change.project_id,
        object_type="file",
        object_id=_paths(change),
        object_repr=_paths(change),
        details={
            "change": change.pk,
            "tool": change.tool,
            "rojo": rojo.slug if rojo else None,
            "conversation": conversation.pk,
        },
        address=address,
    )
