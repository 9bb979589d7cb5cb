"""Reading conversations and rojos, always through the project access check."""

from django.http import Http404

from roject.access import LoginRequired, ProjectAccess, aproject_access, object_id, project_access

from .models import Conversation, Rojo

# The same 404 as for a missing id, so ids of other projects' conversations reveal nothing.
_NO_CONVERSATION = "No such conversation."


def _conversation_query(conversation_id):
    return Conversation.objects.select_related("project", "rojo").filter(
        pk=object_id(conversation_id, "conversation")
    )


async def aconversation_access(
    *, user, conversation_id, write: bool = False
) -> tuple[Conversation, ProjectAccess]:
    """The conversation and the user's access to its project; 404 for non-members."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    conversation = await _conversation_query(conversation_id).afirst()
    if conversation is None:
        raise Http404(_NO_CONVERSATION)
    try:
        access = await aproject_access(user=user, project_id=conversation.project_id, write=write)
    except Http404:
        raise Http404(_NO_CONVERSATION) from None
    return conversation, access


def conversation_access(
    *, user, conversation_id, write: bool = False
) -> tuple[Conversation, ProjectAccess]:
    """Sync twin of aconversation_access."""
    if user is None or not user.is_authenticated:
        raise LoginRequired
    conversation = _conversation_query(conversation_id).first()
    if conversation is None:
        raise Http404(_NO_CONVERSATION)
    try:
        access = project_access(user=user, project_id=conversation.project_id, write=write)
    except Http404:
        raise Http404(_NO_CONVERSATION) from None
    return conversation, access


def _rojo_query(ref: int | str):
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        return Rojo.objects.filter(pk=int(ref))
    return Rojo.objects.filter(slug=ref)


def rojo_get(ref: int | str) -> Rojo:
    rojo = _rojo_query(ref).first()
    if rojo is None:
        raise Http404(f"No rojo {ref!r}.")
    return rojo
