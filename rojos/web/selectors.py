"""Reading conversations, rojos and file changes for the API and the pages; a user reaches
a conversation only through the project access check."""

from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404

from roject.errors import AppError
from roject.members.access import (
    LoginRequired,
    ProjectAccess,
    aproject_access,
    object_id,
    project_access,
)
from roject.models import Project
from roject.server.prepared_queries import PreparedQuery
from rojos.agent.branches import branch_choices, branch_messages, branch_messages_list
from rojos.context.budgets import Left, budget_check
from rojos.context.model_choice import model_check
from rojos.conversations.replay import conversation_events
from rojos.conversations.usage_report import conversation_usage
from rojos.models import Conversation, FileChange, Message, Rojo, RojoMcpServer, TurnRecord

# The same 404 as for a missing id, so ids of other projects' objects reveal nothing.
_NO_CONVERSATION = "No such conversation."
_NO_CHANGE = "No such change."


# Every request about a conversation (its stream, a stop, an approval, an undo) reads it
# with its project and rojo (roject/server/prepared_queries.py).
_CONVERSATION_WITH = PreparedQuery(
    lambda pk: Conversation.objects.select_related("project", "rojo").filter(pk=pk)[:1], int
)


def _conversation_get(conversation_id) -> Conversation | None:
    """(Blocking) The conversation with its project and rojo; None for no such id."""
    return _CONVERSATION_WITH.first(object_id(conversation_id, "conversation"))


async def aconversation_access(
    *, user, conversation_id, write: bool = False
) -> tuple[Conversation, ProjectAccess]:
    """The conversation and the user's access to its project; 404 for non-members."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    conversation = await sync_to_async(_conversation_get)(conversation_id)
    if conversation is None:
        raise Http404(_NO_CONVERSATION)
    try:
        access = await aproject_access(user=user, project_id=conversation.project_id, write=write)
    except Http404:
        raise Http404(_NO_CONVERSATION) from None
    return conversation, access


def conversation_steer_check(*, conversation: Conversation, access: ProjectAccess, user) -> None:
    """A viewer steers (continues, stops, switches the branch of) only their own
    conversations; editors and owners any of the project's.

    Viewers read everything in a project, so they can open anyone's conversation; a message
    or a branch switch there would change what its owner's rojo sees next.
    """
    if not access.can_write and conversation.user_id != user.pk:
        raise PermissionDenied(
            "Only the person who started this conversation or an editor can do that."
        )


def conversation_access(
    *, user, conversation_id, write: bool = False
) -> tuple[Conversation, ProjectAccess]:
    """Sync twin of aconversation_access."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    conversation = _conversation_get(conversation_id)
    if conversation is None:
        raise Http404(_NO_CONVERSATION)
    try:
        access = project_access(user=user, project_id=conversation.project_id, write=write)
    except Http404:
        raise Http404(_NO_CONVERSATION) from None
    return conversation, access


def _rojo_with_mcp_used(**lookup) -> QuerySet[Rojo]:
    used = Exists(RojoMcpServer.objects.filter(rojo=OuterRef("pk")))
    return Rojo.objects.filter(**lookup).annotate(mcp_used=used)[:1]


# Every chat message reads its rojo (roject/server/prepared_queries.py).
_ROJO_BY_PK = PreparedQuery(lambda pk: _rojo_with_mcp_used(pk=pk), int)
_ROJO_BY_SLUG = PreparedQuery(lambda slug: _rojo_with_mcp_used(slug=slug), str)


def rojo_get(ref: int | str) -> Rojo:
    """The rojo, knowing (`mcp_used`) whether it uses MCP servers: in the same query, so
    that a turn of one that uses none asks nothing more."""
    text = str(ref)
    if text.isascii() and text.isdigit():
        rojo = _ROJO_BY_PK.first(int(text)) if len(text) <= 18 else None
    else:
        rojo = _ROJO_BY_SLUG.first(text)
    if rojo is None:
        raise Http404(f"No rojo {ref!r}.")
    return rojo


def rojo_list() -> QuerySet[Rojo]:
    """Every rojo, by name: any logged-in user may chat with any of them."""
    return Rojo.objects.prefetch_related("mcp_links__server")


def conversation_list(*, project: Project) -> QuerySet[Conversation]:
    """A project's conversations, newest first (the caller has checked access to it)."""
    return Conversation.objects.filter(project=project).order_by("-updated")


def conversation_detail_get(*, conversation: Conversation) -> dict[str, Any]:
    """(Blocking) The conversation with its messages, file changes and turn records, and the
    events of its turns (which the page renders through its live handler)."""
    messages = branch_messages_list(conversation)
    changes = list(FileChange.objects.filter(conversation=conversation))
    records = list(TurnRecord.objects.filter(conversation=conversation))
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "rojo_id": conversation.rojo_id,
        "user_id": conversation.user_id,
        "created": conversation.created,
        "updated": conversation.updated,
        "running": conversation.running,
        "waiting_approval": conversation.waiting_approval,
        "allowed_tools": conversation.allowed_tools,
        "pinned": conversation.pinned,
        "model": conversation.model,
        "project_id": conversation.project_id,
        "messages": messages,
        "changes": changes,
        "turns": records,
        "events": conversation_events(
            conversation, messages=messages, records=records, changes=changes
        ),
        "usage": conversation_usage(conversation=conversation, messages=messages),
        "branch": conversation.branch,
        "choices": {str(k): v for k, v in branch_choices(conversation, messages).items()},
    }


# A message that continues a conversation reads it (roject/server/prepared_queries.py).
_CONVERSATION = PreparedQuery(
    lambda pk, project_id: Conversation.objects.filter(pk=pk, project_id=project_id)[:1], int, int
)


@dataclass(frozen=True)
class ChatContext:
    """What a chat message's turn starts from, read in one trip."""

    access: ProjectAccess
    rojo: Rojo
    conversation: Conversation | None
    budgets: list[Left]  # what is left of each budget in force, read now


def chat_context_get(
    *, user, project_id, rojo: int | str, conversation_id: int | None, model: str = ""
) -> ChatContext:
    """(Blocking) What a chat message needs before its turn starts, all in one trip to the
    database thread: the user's access to the project, the rojo, the user's and the
    project's budgets (BudgetExceeded) and the conversation of that project to continue, if
    any. The turn takes the role and the budgets read here for its first step rather than
    read them again. The per-user limits are counted as the turn starts
    (rojos.turns.limits), in its transaction. A `model` the rojo does not offer is refused
    here (ModelNotOffered), before anything is stored."""
    access = project_access(user=user, project_id=project_id)
    found = rojo_get(rojo)
    if model:
        model_check(found, model)
    budgets = budget_check(user=user, project_id=access.project.pk)
    if conversation_id is None:
        return ChatContext(access, found, None, budgets)
    conversation = _CONVERSATION.first(
        object_id(conversation_id, "conversation"), access.project.pk
    )
    if conversation is None:
        raise Http404("No such conversation.")
    conversation_steer_check(conversation=conversation, access=access, user=user)
    if conversation.via_mcp:
        raise AppError("This conversation holds calls made through MCP; start a new one to chat.")
    return ChatContext(access, found, conversation, budgets)


async def achange_access(
    *, user, change_id, write: bool = False
) -> tuple[FileChange, ProjectAccess]:
    """The recorded change and the user's access to its project; a change of a project the
    user is not a member of gets the same 404 as a missing one."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    change = await FileChange.objects.filter(pk=object_id(change_id, "change")).afirst()
    if change is None:
        raise Http404(_NO_CHANGE)
    try:
        access = await aproject_access(user=user, project_id=change.project_id, write=write)
    except Http404:
        raise Http404(_NO_CHANGE) from None
    return change, access


def turn_changes_list(*, conversation: Conversation, message_id: int) -> list[FileChange]:
    """(Blocking) The changes of the turn that the user message `message_id` started: those
    of the messages after it and before the next user message; 404 for no such message."""
    start = Message.objects.filter(
        conversation=conversation, pk=message_id, role=Message.Role.USER
    ).first()
    if start is None:
        raise Http404("No such message.")
    path = branch_messages(conversation, start.branch)  # the branch the turn is on
    end = path.filter(role=Message.Role.USER, position__gt=start.position).order_by("position")
    end = end.first()
    changes = FileChange.objects.filter(
        conversation=conversation,
        message__in=path.filter(position__gt=start.position).values("pk"),
    )
    if end is not None:
        changes = changes.filter(message__position__lt=end.position)
    return list(changes)
