"""The read-only page of a conversation: what "Copy link" copies.

Every member of a project already reads every conversation of it (the list, the API), so
the link exposes nothing new: it is a view without the composer and the controls that
change anything, for showing a conversation to a colleague. A non-member gets the same 404
as for a missing conversation; the page's script reads through the API, which checks again.
"""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from roject.members.access import object_id, project_access
from rojos.models import Conversation

_NO_CONVERSATION = "No such conversation."


@login_required
def conversation_read_page(request, project_id: int, conversation_id: int):
    """One conversation of the project, read-only: its messages and tool activity."""
    try:
        access = project_access(user=request.user, project_id=project_id)
    except Http404:
        raise Http404(_NO_CONVERSATION) from None
    conversation = (
        Conversation.objects.select_related("user", "rojo")
        .filter(pk=object_id(conversation_id, "conversation"), project=access.project)
        .first()
    )
    if conversation is None:
        raise Http404(_NO_CONVERSATION)
    config = {"project": {"id": access.project.pk}, "conversation": conversation.pk}
    return render(
        request,
        "conversation_read.html",
        {"project": access.project, "conversation": conversation, "config": config},
    )
